"""`faux-checks check` with a cut-off policy: a score read as "crosses the cut-off 700 pts".

Data: :func:`_support.make_data` (400 rows; ``proxy`` = 2·[sex = M] + N(0, 0.5²)). The unfair score
650 + 40·f0 + 60·proxy moves by about 120 pts when sex changes (the proxy moves with it), so people near 700 pts
cross; the fair score 700 + 40·f0 reads no proxy and no one crosses. δ = 1,000 pts flags no one in either: the
decision comes from the crossing reading alone.
"""

from __future__ import annotations

import json

import pytest

import _support


POLICY = ('protected = "sex"\ntarget_output = "value"\nmin_aux_quality = 0.7\n'
          '[faux]\ndelta = 1000\nunit = "pts"\ncutoff = 700\ncutoff_side = "above"\nmax_flagged_fraction = 0.1\n'
          '[aux]\nepochs = 30\n[decision]\nmin_group_rows = 20\naux_seeds = 1\n')


@pytest.mark.slow        # two gates on 400 rows through the CLI (aux training, reports): 10-30 s
def test_check_with_a_cutoff_fails_a_score_that_crosses_it_and_passes_one_that_does_not(tmp_path, capsys):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks_app.cli import main

    data = _support.make_data(400).drop(columns="y")
    data.to_csv(tmp_path / "audit.csv", index=False)
    (tmp_path / "policy.toml").write_text(POLICY)
    save_torchscript(_support.linear([40.0, 0.0, 0.0, 0.0, 60.0], bias=650.0), tmp_path / "unfair.pt")
    save_torchscript(_support.linear([40.0, 0.0, 0.0, 0.0, 0.0], bias=700.0), tmp_path / "fair.pt")
    args = ["--data", str(tmp_path / "audit.csv"), "--policy", str(tmp_path / "policy.toml")]
    code = main(["check", "--model", str(tmp_path / "unfair.pt"), *args, "--report-dir", str(tmp_path / "rep")])
    out = capsys.readouterr()
    assert code == 1, out.err
    assert "crosses the cut-off 700 pts" in out.out + out.err
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    reading = report["check"]["outcome"]["cutoff"]
    assert reading["unit"] == "pts" and reading["cutoff"] == 700 and reading["side"] == "above"
    # the score is linear: its counterfactual differs by 60 × the proxy's move, so who crosses follows from the
    # recorded outputs; at least a tenth of 400 people lie within the ~120 pts move of the cut-off
    assert reading["interval"]["lower"] > 0.1 and reading["n_crossed"] + reading["n_undefined"] == reading["interval"]["k"]
    rules = {r["rule"]: r["status"] for r in report["check"]["rules"]}
    assert rules["cutoff_crossing"] == "exceeded" and rules["max_flagged_fraction"] == "ok"
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "Who crosses the cut-off 700 pts" in page and "favourable side: 700 pts or more" in page
    code = main(["check", "--model", str(tmp_path / "fair.pt"), *args, "--report-dir", str(tmp_path / "fair")])
    fair = json.loads((tmp_path / "fair" / "report.json").read_text())
    assert code == 0, capsys.readouterr().err
    assert fair["check"]["outcome"]["cutoff"]["n_crossed"] == 0
    assert fair["check"]["outcome"]["cutoff"]["interval"]["upper"] < 0.01        # Clopper-Pearson of 0 in 400: 0.92%
