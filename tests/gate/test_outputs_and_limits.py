"""Output paths checked first, probability outputs checked on every row,
``max_flagged_fraction = 0`` explained, ``aux.hidden`` bounded, one metric name per aux-quality reason."""

from __future__ import annotations

import pytest
import torch

import _support
from _support import FAIR, UNFAIR
from faux_checks import InputError
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import load_policy
from faux_checks.gate.rows import check_model_outputs
from faux_checks.method.output import TargetOutput
from faux_checks_app.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from faux_checks.inputs.models import save_torchscript

    d = tmp_path_factory.mktemp("small")
    data = _support.make_data(400)
    data.to_csv(d / "data.csv", index=False)
    return {"dir": d, "frame": data, "data": d / "data.csv", "policy": _support.write_policy(d / "policy.toml"),
            "fair": save_torchscript(_support.linear(FAIR), d / "fair.pt")}


def _check(files, *extra) -> list[str]:
    # a model file that does not exist: an output path refused first proves nothing was loaded or scored
    return ["check", "--model", str(files["dir"] / "absent.pt"), "--data", str(files["data"]),
            "--policy", str(files["policy"]), "-q", *extra]


def test_output_paths_are_refused_before_anything_is_loaded(files, tmp_path, capsys):
    cases = [
        (["--scores-out", str(tmp_path / "missing" / "s.csv")],
         f"--scores-out {tmp_path / 'missing' / 's.csv'}: folder {tmp_path / 'missing'} does not exist; create it "
         "first or choose another --scores-out (nothing was scored)"),
        (["--scores-out", str(files["data"] / "s.csv")],
         f"--scores-out {files['data'] / 's.csv'}: {files['data']} is a file, not a folder; choose another "
         "--scores-out (nothing was scored)"),
        (["--report-dir", str(files["data"] / "rep")],
         f"--report-dir {files['data'] / 'rep'}: {files['data']} is a file, not a folder; choose another "
         "--report-dir (nothing was scored)"),
    ]
    for extra, message in cases:
        assert main(_check(files, *extra)) == 2
        assert capsys.readouterr().err.strip() == f"faux-checks: could not decide: {message}"
    assert list(tmp_path.iterdir()) == []                      # the write probe leaves nothing behind
    assert main(["score-large", "--model", str(files["dir"] / "absent.pt"), "--data", str(files["data"]),
                 "--protected", "sex", "--out", str(tmp_path / "no" / "s.parquet"), "-q"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"faux-checks: could not decide: --out {tmp_path / 'no' / 's.parquet'}: folder {tmp_path / 'no'} does not "
        "exist; create it first or choose another --out (nothing was scored)")


def test_an_unwritable_folder_is_named_with_the_systems_words(files, tmp_path, monkeypatch, capsys):
    import errno
    import tempfile

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)       # root ignores permission bits: simulate the mount
    assert main(_check(files, "--report-dir", str(tmp_path / "a" / "rep"))) == 2
    assert capsys.readouterr().err.strip() == (
        f"faux-checks: could not decide: --report-dir {tmp_path / 'a' / 'rep'}: cannot write in {tmp_path} "
        "(Read-only file system); choose another --report-dir (nothing was scored)")


class Echo(torch.nn.Module):
    """Returns its first two inputs as the model output: the test sets the outputs row by row."""

    def forward(self, x):
        return x[:, :2]


def test_softmax_rows_must_sum_to_one_on_every_row_not_only_the_probe():
    X = torch.full((600, 3), 0.5)
    X[450] = torch.tensor([0.9, 0.4, 0.0])                     # beyond the 256 probe rows
    X[451] = torch.tensor([0.2, 0.2, 0.0])
    X[500] = torch.tensor([float("nan"), 0.5, 0.0])            # non-finite: the scorer's undefined score
    with pytest.raises(InputError) as info:
        check_model_outputs(Echo(), X, TargetOutput("softmax"), rows=torch.arange(600).numpy() + 1000)
    assert str(info.value) == (
        "output form 'softmax' (policy target_output, CLI --output-form): the target model's outputs on 2 of 600 "
        "audited rows are not probabilities that sum to 1 (within 0.001): e.g. input row 1,450: [0.9, 0.4], sum 1.3; "
        "declare output form 'logits' for unnormalised class scores, or make the model end with a softmax. Nothing "
        "was scored")
    X[450], X[451] = torch.tensor([0.7, 0.3, 0.0]), torch.tensor([0.5, 0.5004, 0.0])   # within the tolerance
    check_model_outputs(Echo(), X, TargetOutput("softmax"))
    check_model_outputs(Echo(), X * 3, TargetOutput("logits"))     # class scores: nothing to check


def test_probability_outside_unit_interval_is_refused():
    X = torch.full((300, 2), 0.25)
    X[299, 0] = 1.5
    with pytest.raises(InputError, match=r"^output form 'probability' .* outputs on 1 of 300 audited rows lie outside "
                                         r"\[0, 1\]: e.g. input row 299: \[1.5\]; declare output form 'logit'"):
        check_model_outputs(lambda x: x[:, 0], X, TargetOutput("probability"))


def test_check_refuses_an_unnormalised_softmax_before_scoring(files, capsys):
    from faux_checks.inputs.models import save_torchscript

    two = torch.nn.Linear(5, 2)                                  # two sigmoids: each in [0, 1], sums up to 2
    with torch.no_grad():
        two.weight[:] = torch.tensor([[0.1, 0, 0, 0, 0.2], [0.2, 0, 0, 0, -0.1]])
        two.bias[:] = torch.tensor([0.3, 0.5])
    scores = save_torchscript(torch.nn.Sequential(two, torch.nn.Sigmoid()), files["dir"] / "two_sigmoids.pt")
    code = main(["check", "--model", str(scores), "--data", str(files["data"]), "--policy", str(files["policy"]),
                 "--output-form", "softmax", "-q"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("faux-checks: could not decide: output form 'softmax' (policy target_output, CLI "
                          "--output-form): the target model's outputs on 400 of 400 audited rows are not "
                          "probabilities that sum to 1 (within 0.001): e.g. input row 0: ["), err


def test_a_zero_limit_says_it_can_never_pass(files):
    path = files["dir"] / "zero.toml"
    path.write_text(files["policy"].read_text().replace("max_flagged_fraction = 0.1", "max_flagged_fraction = 0"))
    policy = load_policy(path)
    result = check_one_attribute(_support.linear(FAIR), files["frame"], policy=policy)
    assert result.decision == "undecided"
    upper = result.to_dict()["interval"]["upper"]
    assert result.reasons[0] == (
        f"flagged fraction 0.00% (95% CI 0.00%–{upper:.2%}): max_flagged_fraction is 0 and no individual is flagged: "
        f"the fraction equals the limit and the interval's upper bound ({upper:.2%} at 400 rows) is above 0 at any "
        "number of rows, so a limit of 0 can fail a model but never pass one; set a positive limit (e.g. 0.01) "
        "(LIC score > δ = 0.05: 0; of 400 individuals)")   # one aux seed (tests/_support.POLICY): no seeds clause
    assert "seeds disagree" not in result.reasons[0]
    unfair = check_one_attribute(_support.linear(UNFAIR), files["frame"], policy=policy)
    assert unfair.decision == "failed" and "even the lower bound exceeds it" in unfair.reasons[0]



@pytest.mark.parametrize("hidden,found", [("[64, 100000]", "[64, 100000] (layer 2 has 100,000 units)"),
                                          ("[8, 8, 8, 8, 8, 8, 8, 8, 8]", "[8, 8, 8, 8, 8, 8, 8, 8, 8] (9 layers)")])
def test_aux_hidden_is_bounded(tmp_path, hidden, found):
    path = tmp_path / "p.toml"
    path.write_text(f'protected = "sex"\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.05\n[aux]\nhidden = {hidden}\n')
    with pytest.raises(InputError) as info:
        load_policy(path)
    assert str(info.value) == (f"policy {path} is invalid: aux.hidden: found {found}; expected at most 8 layers of at "
                               "most 4,096 units each (the default is [64, 64])")
    path.write_text('protected = "sex"\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.05\n[aux]\nhidden = [4096, 32]\n')
    assert load_policy(path).aux.hidden == (4096, 32)


def test_aux_quality_reason_names_its_metric_once(files):
    result = check_one_attribute(_support.linear(FAIR), files["frame"], policy=load_policy(files["policy"]))
    (reason,) = [r for r in result.reasons if r.startswith("auxiliary model ")]
    assert "roc_auc roc_auc" not in reason
    assert reason.startswith("auxiliary model roc_auc 0.") and reason.endswith("; F vs M): lower bound >= "
                                                                                "min_aux_quality 0.7")


class SoftmaxBadPast(torch.nn.Module):
    """A softmax over two classes, except on rows whose f3 exceeds 50: there [0.9, 0.4] (sum 1.3)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 2)
        with torch.no_grad():
            self.lin.weight[:] = torch.tensor([[0.5, 0.0, 0.0, 0.0, 0.8], [-0.5, 0.0, 0.0, 0.0, -0.8]])
            self.lin.bias.zero_()

    def forward(self, x):
        p = torch.softmax(self.lin(x), dim=1)
        return torch.where(x[:, 3:4] > 50.0, torch.tensor([[0.9, 0.4]]), p)


def test_score_large_checks_the_outputs_of_every_chunk_not_only_the_sample(tmp_path, capsys):
    """A softmax that is wrong on one row past the sample and the first chunk refuses the run."""
    from faux_checks.gate.stream.plan import resolve_feature_spec
    from faux_checks.gate.stream.passes import sample_pass, stream_attributes
    from faux_checks.gate.stream.source import DataSource
    from faux_checks.inputs.models import save_torchscript

    data = _support.make_data(3000, seed=4)
    policy_path = _support.write_policy(tmp_path / "policy.toml")
    policy_path.write_text(policy_path.read_text().replace("[aux]\n", "[aux]\nmax_train_rows = 300\n"))
    policy = load_policy(policy_path)
    data.to_csv(tmp_path / "clean.csv", index=False)
    source = DataSource.open(tmp_path / "clean.csv")
    spec = resolve_feature_spec(source, policy, None, chunk_rows=500)
    sampled = set(sample_pass(source, stream_attributes(policy, source.columns), feature_spec=spec,
                                  chunk_rows=500)["sex"].rows.tolist())
    bad = max(set(range(2000, 3000)) - sampled)                  # a row of the fifth chunk or later, not sampled
    first = bad // 500 * 500
    data.loc[bad, "f3"] = 100.0
    data.to_csv(tmp_path / "data.csv", index=False)
    model = save_torchscript(SoftmaxBadPast(), tmp_path / "bad_past.pt")
    base = ["score-large", "--model", str(model), "--policy", str(policy_path), "--workers", "0",
            "--output-form", "softmax", "--chunk-rows", "500"]
    assert main(base + ["--data", str(tmp_path / "clean.csv"), "--out", str(tmp_path / "clean.parquet")]) in (0, 1)
    capsys.readouterr()                                          # the same model on the clean file: scored
    assert main(base + ["--data", str(tmp_path / "data.csv"), "--out", str(tmp_path / "s.parquet")]) == 2
    err = capsys.readouterr().err
    assert (f"faux-checks: could not decide: output form 'softmax' (policy target_output, CLI --output-form): the "
            f"target model's outputs on 1 of 500 audited rows of the chunk of input rows {first:,}-{first + 499:,} are "
            f"not probabilities that sum to 1 (within 0.001): e.g. input row {bad:,}: [0.9, 0.4], sum 1.3; declare "
            "output form 'logits' for unnormalised class scores, or make the model end with a softmax. No scores "
            "file was written") in err, err
    assert not (tmp_path / "s.parquet").exists()
