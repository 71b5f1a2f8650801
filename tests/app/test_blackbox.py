"""Forward-only targets (ONNX, XGBoost, LightGBM, scikit-learn via skops): loading, scores against closed forms
and the PyTorch path, ground-truth ranking, and the gate end to end.

Data: tests/_support.make_data (f0..f3 independent of sex, proxy = 2·[sex = M] + noise).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("skops")
pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")

from _support import FEATURES, make_data, write_policy  # noqa: E402

from faux_checks import AuxiliaryModel, FAuxTester, TargetOutput  # noqa: E402
from faux_checks.errors import InputError, UnsafeModelError  # noqa: E402
from faux_checks.inputs.models import load_model  # noqa: E402
from faux_checks.method.counterfactual import counterfactual_inputs  # noqa: E402
from faux_checks.method.forward import ForwardOnlyTarget, is_forward_only  # noqa: E402
from faux_checks.method.output import predict_probability, resolve_output_form  # noqa: E402


@pytest.fixture(scope="module")
def small():
    """400 rows, X (n, 5) float32 (f0..f3, proxy), c = [sex = M], labels y; one aux model and its swap reference."""
    df = make_data(400, seed=3)
    X = df[FEATURES].to_numpy(np.float32)
    c = (df["sex"] == "M").to_numpy().astype(np.int64)
    y = ((X[:, 0] + 0.8 * X[:, 4] + np.random.default_rng(0).normal(size=len(X))) > 1).astype(int)
    aux = AuxiliaryModel(kind="binary", seed=0, epochs=30).fit(X, c)
    return X, c, y, aux


def _swap(target, aux, X, c, **kw):
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput(), **kw)
    return tester.fit_reference(X, c)


def _mlp(d: int, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(d, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).eval()
    with torch.no_grad():
        net[2].weight.mul_(4.0)                    # a steeper target: scores spread over 0..0.5
    return net


def _onnx(net, d, path):
    torch.onnx.export(net, (torch.zeros(2, d),), str(path), dynamo=False, input_names=["x"], output_names=["logit"],
                      dynamic_axes={"x": {0: "n"}})
    return path


@pytest.mark.slow
def test_skops_logistic_regression_matches_the_closed_form_of_the_swap_score_and_eq9(small, tmp_path):
    import skops.io as sio
    from sklearn.linear_model import LogisticRegression

    X, c, y, aux = small
    lr = LogisticRegression(C=10.0).fit(X.astype(np.float64), y)
    sio.dump(lr, tmp_path / "lr.skops")
    target = load_model(tmp_path / "lr.skops")
    assert is_forward_only(target) and target.access == "forward (scikit-learn via skops)"
    tester = _swap(target, aux, X, c)
    res = tester.evaluate(X, c, evidence=True)

    # closed form: σ(w·x′ + b) − σ(w·x + b) at the counterfactual x′ the aux model gives
    w, b = lr.coef_[0].astype(np.float64), float(lr.intercept_[0])
    ((_, x1, undef),) = counterfactual_inputs(aux.net_, torch.as_tensor(X), c, reference=tester.reference)
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))                                   # noqa: E731
    expected = np.abs(sig(x1.double().numpy() @ w + b) - sig(X.astype(np.float64) @ w + b))
    assert not undef.any() and not res.undefined.any()
    np.testing.assert_allclose(res.scores, expected, rtol=1e-6, atol=1e-9)
    assert res.scores.max() > 0.2                                                # the proxy carries c: scores are not 0
    # forward-only evidence: complete (adds up to the change) and zero on features that do not move
    change = res.counterfactual_probability - res.probability
    np.testing.assert_allclose(res.evidence.astype(np.float64).sum(axis=1), change, atol=1e-5)
    moving = (x1 != torch.as_tensor(X)).any(dim=0).numpy()
    assert np.all(res.evidence[:, ~moving] == 0)

    # eq. 9 by central finite differences along J⁺ against its closed form p(1 − p)·|w·a| / ‖a‖²
    faux = FAuxTester(target, aux, variant="faux", output=TargetOutput()).evaluate(X, evidence=True)
    J = aux.jacobian(torch.as_tensor(X))[:, 0].double().numpy()                  # (n, d) aux log-odds gradient a
    p = sig(X.astype(np.float64) @ w + b)
    closed = p * (1 - p) * np.abs(J @ w) / (J ** 2).sum(axis=1)
    err = np.abs(faux.scores / closed - 1)
    assert err.max() < 1e-2, err.max()                                           # O(h²) at the default step 0.1
    fine = FAuxTester(target, aux, variant="faux", output=TargetOutput(), fd_step=0.02).evaluate(X, evidence=False)
    assert np.abs(fine.scores / closed - 1).max() < err.max() / 5                 # a 5× smaller step: ≥ 5× closer
    assert not faux.no_split_crossed.any()
    np.testing.assert_allclose(np.abs(faux.evidence.astype(np.float64).sum(axis=1)), faux.scores, rtol=1e-3)


def test_onnx_export_of_a_pytorch_mlp_gives_the_pytorch_scores(small, tmp_path):
    X, c, _, aux = small
    net = _mlp(X.shape[1])
    target = load_model(_onnx(net, X.shape[1], tmp_path / "mlp.onnx"))
    assert target.access == "forward (onnxruntime)"
    torch_res = _swap(net, aux, X, c).evaluate(X, c, evidence=True)
    onnx_res = _swap(target, aux, X, c).evaluate(X, c, evidence=True)
    big = torch_res.scores > 1e-2
    assert big.sum() > 100
    rel = np.abs(onnx_res.scores - torch_res.scores) / np.maximum(torch_res.scores, 1e-2)
    assert rel.max() <= 1e-5, rel.max()                                         # ≤ 1e-5 relative (abs. 1e-7 below 0.01)
    np.testing.assert_array_equal(onnx_res.scores > 0.1, torch_res.scores > 0.1)
    # the forward-only evidence adds up to the change exactly (the PyTorch path's integrated gradients up to quadrature)
    change = onnx_res.counterfactual_probability - onnx_res.probability
    np.testing.assert_allclose(onnx_res.evidence.astype(np.float64).sum(axis=1), change, atol=1e-5)


def test_xgboost_and_lightgbm_files_load_as_margins_with_their_libraries_probabilities(small, tmp_path):
    import lightgbm as lgb
    import xgboost as xgb

    X, c, y, _ = small
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1}, xgb.DMatrix(X, label=y), 20)
    gbm = lgb.train({"objective": "binary", "verbose": -1, "num_threads": 1, "min_data_in_leaf": 5},
                    lgb.Dataset(X, y), 20)
    booster.save_model(tmp_path / "m.json")
    booster.save_model(tmp_path / "m.ubj")
    gbm.save_model(tmp_path / "m.txt")
    Xt = torch.as_tensor(X)
    for name, expected in (("m.json", booster.predict(xgb.DMatrix(X))), ("m.ubj", booster.predict(xgb.DMatrix(X))),
                           ("m.txt", gbm.predict(X))):
        target = load_model(tmp_path / name)
        out = resolve_output_form(target, Xt, TargetOutput())
        assert out.form == "logit", name
        np.testing.assert_allclose(predict_probability(target, Xt, out), expected, rtol=1e-5, err_msg=name)
    with pytest.raises(InputError, match="expects 5 encoded features but X has 4"):
        load_model(tmp_path / "m.json")(Xt[:, :4])


def test_forward_only_targets_refuse_gradients_and_gradient_variants(small):
    X, c, _, aux = small
    target = ForwardOnlyTarget(lambda x: x[:, 4], access="forward (test)", output_form="logit")
    with pytest.raises(InputError, match="forward-only .*no input gradients"):
        target(torch.as_tensor(X).requires_grad_(True))
    for variant in ("ng", "ig", "projection"):
        with pytest.raises(InputError, match=f"variant '{variant}' needs the target's gradient"):
            FAuxTester(target, aux, variant=variant).evaluate(X)
    from faux_checks.method.counterfactual import SwapSettings

    with pytest.raises(InputError, match="first_order"):
        _swap(target, aux, X, c, swap=SwapSettings(evaluation="first_order")).evaluate(X, c)


def test_eq9_on_trees_reports_rows_where_no_split_was_crossed(small):
    X, c, _, aux = small
    # a one-split "tree" on the proxy at 1.0: only rows within ± step of the split see a change
    target = ForwardOnlyTarget(lambda x: np.where(x[:, 4] > 1.0, 2.0, -2.0), access="forward (test)",
                               output_form="logit")
    res = FAuxTester(target, aux, variant="faux").evaluate(X, evidence=False)
    J = aux.jacobian(torch.as_tensor(X))[:, 0].double().numpy()
    u = J / (J ** 2).sum(axis=1, keepdims=True)                                  # J⁺ (n, d)
    h = 0.1 / np.abs(u).max(axis=1)
    crosses = np.abs(X[:, 4] - 1.0) < h * np.abs(u[:, 4])
    np.testing.assert_array_equal(res.no_split_crossed, ~crosses)
    assert np.all(res.scores[~crosses] == 0) and np.all(res.scores[crosses] > 0)
    assert 0 < crosses.sum() < len(X)


@pytest.mark.slow
def test_skops_refuses_untrusted_types_with_their_list(tmp_path):
    import skops.io as sio
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from operator import neg

    from sklearn.preprocessing import FunctionTransformer

    X = np.random.default_rng(0).normal(size=(50, 3))
    pipe = make_pipeline(FunctionTransformer(neg), LogisticRegression()).fit(X, (X[:, 0] > 0).astype(int))
    sio.dump(pipe, tmp_path / "p.skops")
    untrusted = sio.get_untrusted_types(file=tmp_path / "p.skops")
    assert untrusted == ["_operator.neg"]                                        # a function skops does not trust
    with pytest.raises(UnsafeModelError, match="does not trust by default") as err:
        load_model(tmp_path / "p.skops")
    for name in untrusted:
        assert name in str(err.value)
    target = load_model(tmp_path / "p.skops", trusted_types=untrusted)
    np.testing.assert_allclose(target.predict_raw(X), pipe.predict_proba(X))


def test_xgboost_ranks_truly_unfair_individuals_like_an_mlp_on_proxy_ground_truth():
    """Small version of benchmarks/bench_blackbox.py --part ap (one seed, fewer rows and trees)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_blackbox

    cell = bench_blackbox.proxy_targets(seed=0, n_train=3000, n_audit=1200, trees=80, depth=4, mlp_epochs=10)
    res = bench_blackbox.ranking(cell)
    for name in ("mlp", "xgb"):
        assert res[name]["ap"] > res[name]["true_fraction"] + 0.25, res          # far above a random ranking
    assert res["xgb"]["ap"] >= res["mlp"]["ap"] - 0.05, res


def test_check_one_attribute_gates_an_onnx_model_as_its_pytorch_twin(tmp_path):
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.policy import load_policy

    df = make_data(400, seed=0)
    net = _mlp(len(FEATURES), seed=1)
    policy = load_policy(write_policy(tmp_path / "p.toml", extra="[testers.fta]\nthreshold = 1.0\n"))
    onnx_model = load_model(_onnx(net, len(FEATURES), tmp_path / "m.onnx"))
    a = check_one_attribute(net, df, policy=policy)
    b = check_one_attribute(onnx_model, df, policy=policy)
    assert b.decision == a.decision and b.n_flagged == a.n_flagged
    np.testing.assert_allclose(b.scores, a.scores, rtol=1e-5, atol=1e-7)
    assert b.provenance["target_access"] == "forward (onnxruntime)"
    assert a.provenance["target_access"] == "autograd (PyTorch)"
    assert "telescoping" in b.provenance["evidence_method"]
    assert b.testers["fta"]["value"] is None and "forward-only" in b.testers["fta"]["summary"]
    assert a.testers["fta"]["value"] is not None


@pytest.mark.slow
def test_registry_reads_mlflow_flavours_that_store_safe_formats_and_refuses_pickled_ones(small, tmp_path):
    import mlflow
    import xgboost as xgb
    from sklearn.linear_model import LogisticRegression

    from faux_checks.registry import Registry
    from faux_checks.registry.flavors import flavor_model_file

    X, c, y, _ = small
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 2, "nthread": 1}, xgb.DMatrix(X, label=y), 5)
    lr = LogisticRegression().fit(X, y)
    mlflow.xgboost.save_model(booster, tmp_path / "xgb", pip_requirements=[])
    mlflow.sklearn.save_model(lr, tmp_path / "skops", serialization_format="skops", pip_requirements=[])
    mlflow.sklearn.save_model(lr, tmp_path / "pickled", serialization_format="cloudpickle", pip_requirements=[])
    assert flavor_model_file(tmp_path / "xgb") == (tmp_path / "xgb" / "model.ubj", "xgboost")
    with pytest.raises(UnsafeModelError, match="model.pkl .*needs unpickling"):
        flavor_model_file(tmp_path / "pickled")

    # a version whose source is such a folder (no faux-checks tags): download names the flavour's file
    reg = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = reg.client
    exp = client.create_experiment("flavours")
    for name, folder in (("xgb-model", "xgb"), ("lr-model", "skops")):
        run = client.create_run(exp)
        client.log_artifacts(run.info.run_id, str(tmp_path / folder), "model")
        client.create_registered_model(name)
        client.create_model_version(name, f"{run.info.artifact_uri}/model", run_id=run.info.run_id)
    path, _ = reg.download("xgb-model", 1, tmp_path / "x")
    assert path.name == "model.ubj"
    np.testing.assert_allclose(predict_probability(load_model(path), X, TargetOutput("logit")),
                               booster.predict(xgb.DMatrix(X)), rtol=1e-5)
    path, _ = reg.download("lr-model", 1, tmp_path / "s")
    assert path.name == "model.skops"
    np.testing.assert_allclose(load_model(path).predict_raw(X), lr.predict_proba(X.astype(np.float64)))


@pytest.mark.slow
def test_tree_targets_snap_one_hot_moves_by_default_and_an_explicit_soft_gets_a_note(small, tmp_path):
    import pandas as pd
    import skops.io as sio
    import xgboost as xgb
    from sklearn.linear_model import LogisticRegression

    from faux_checks import FeatureSpec
    from faux_checks.gate.check_notes import tree_note
    from faux_checks.gate.scorer import swap_categorical
    from faux_checks.gate.policy import load_policy

    X, _, y, _ = small
    xgb.train({"objective": "binary:logistic", "nthread": 1}, xgb.DMatrix(X, label=y), 3).save_model(tmp_path / "m.json")
    sio.dump(LogisticRegression().fit(X, y), tmp_path / "lr.skops")
    tree, linear = load_model(tmp_path / "m.json"), load_model(tmp_path / "lr.skops")
    assert tree.piecewise_constant and not linear.piecewise_constant
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "job": ["x", "y", "x"]})
    spec, numeric = FeatureSpec.fit(frame, ["a", "job"]), FeatureSpec.fit(frame, ["a"])
    default = load_policy(write_policy(tmp_path / "auto.toml"))
    assert default.faux.swap_categorical == "coupled"                  # discrete levels for every target
    assert swap_categorical(default.faux, tree) == swap_categorical(default.faux, linear) == "coupled"
    assert tree_note(tree, default, spec) == []
    auto = default.model_copy(update={"faux": default.faux.model_copy(update={"swap_categorical": "auto"})})
    soft = auto.model_copy(update={"faux": auto.faux.model_copy(update={"swap_categorical": "soft"})})
    snap = auto.model_copy(update={"faux": auto.faux.model_copy(update={"swap_categorical": "snap"})})
    # 'auto': snap for the tree, soft for the logistic regression; explicit settings are kept
    assert (swap_categorical(auto.faux, tree), swap_categorical(auto.faux, linear)) == ("snap", "soft")
    assert (swap_categorical(soft.faux, tree), swap_categorical(snap.faux, linear)) == ("soft", "snap")
    assert tree_note(tree, auto, spec) == []
    assert "swap_categorical = 'snap'" in tree_note(tree, soft, spec)[0]
    assert tree_note(tree, snap, spec) == [] and tree_note(linear, soft, spec) == [] and tree_note(tree, soft, numeric) == []


@pytest.mark.slow
def test_score_large_loads_a_skops_model_with_a_reviewed_type_only_with_trust_type(tmp_path, capsys):
    """``score-large --trust-type``: refused (exit 2, the type named, no scores file) without it; scored with it."""
    import pandas as pd
    import skops.io as sio
    from operator import neg

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from faux_checks_app.cli import main

    data = make_data(400, seed=0)
    data.to_csv(tmp_path / "d.csv", index=False)
    X = data[FEATURES].to_numpy(np.float32)
    sio.dump(make_pipeline(FunctionTransformer(neg), LogisticRegression()).fit(X, (X[:, 0] > 0).astype(int)),
             tmp_path / "m.skops")
    policy = tmp_path / "p.toml"
    policy.write_text('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.0\n[faux]\ndelta = 0.05\n'
                      'max_flagged_fraction = 0.1\n[aux]\nepochs = 3\n'
                      '[decision]\nmin_group_rows = 20\n')
    out = tmp_path / "scores.csv"
    cmd = ["score-large", "--model", str(tmp_path / "m.skops"), "--data", str(tmp_path / "d.csv"), "--protected", "sex",
           "--label", "y", "--policy", str(policy), "--out", str(out), "--workers", "0"]
    assert main(cmd) == 2
    assert "_operator.neg" in capsys.readouterr().err and not out.exists()
    capsys.readouterr()
    main([*cmd, "--trust-type", "_operator.neg"])                      # scored: a decision, whatever it is
    printed = capsys.readouterr()
    assert printed.out.split(":")[0].split()[0] in ("passed", "failed", "undecided") and "error" not in printed.err
    assert len(pd.read_csv(out)) == 400
