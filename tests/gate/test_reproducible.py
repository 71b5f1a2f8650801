"""Same model, data, policy and seed: the same scores and decision in two separate processes.

Two `faux-checks check` processes run at the same time on the same inputs; their per-row scores
CSVs must be byte-identical and their report.json numbers equal. The report must hold what a
reproduction needs (hashes, seed, settings, thread count, package versions), and the user's
files are left as they were.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _support import UNFAIR, linear, make_data, sha256, write_policy

pytestmark = pytest.mark.slow

#: Provenance fields a reproduction needs (CheckResult.provenance).
REPRO_FIELDS = ["seed", "policy_sha256", "policy", "data_sha256", "n_input_rows", "feature_spec", "variant",
                "target_output", "aux_training", "audit_sample_seed", "aux_sample_seed", "torch_num_threads",
                "torch_num_interop_threads", "torch_deterministic_algorithms", "packages", "platform", "model_sha256"]
VOLATILE = {"checked_at"}   # wall-clock time of the run: the only field allowed to differ


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("faux-checks")
    return [str(script)] if script.exists() else [sys.executable, "-m", "faux_checks_app.cli"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from faux_checks.inputs.models import save_torchscript

    d = tmp_path_factory.mktemp("repro")
    make_data(500, seed=7).to_csv(d / "data.csv", index=False)
    save_torchscript(linear(UNFAIR), d / "model.pt")
    write_policy(d / "policy.toml", extra="[testers.fta]\nthreshold = 0.5\n[testers.demographic_parity]\n"
                                          "threshold = 0.2\n")
    inputs = [d / "data.csv", d / "model.pt", d / "policy.toml"]
    before = {p.name: sha256(p) for p in inputs}
    procs = []
    for i in (1, 2):
        cmd = _cli() + ["check", "--model", str(d / "model.pt"), "--data", str(d / "data.csv"), "--protected", "sex",
                        "--label", "y", "--policy", str(d / "policy.toml"), "--scores-out", str(d / f"scores{i}.csv"),
                        "--report-dir", str(d / f"report{i}")]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=dict(os.environ), cwd=d))
    results = [(p.wait(timeout=900), p.stdout.read(), p.stderr.read()) for p in procs]
    return {"dir": d, "results": results, "before": before, "inputs": inputs}


def test_two_processes_give_byte_identical_scores_and_the_same_decision(runs):
    d = runs["dir"]
    for code, _out, err in runs["results"]:
        assert code == 1, err                      # the unfair model fails the policy in both
    assert (d / "scores1.csv").read_bytes() == (d / "scores2.csv").read_bytes()
    one, two = (json.loads((d / f"report{i}" / "report.json").read_text()) for i in (1, 2))
    assert one["decision"] == two["decision"] == "failed"
    for report in (one, two):
        report["check"]["provenance"] = {k: v for k, v in report["check"]["provenance"].items() if k not in VOLATILE}
    assert one["check"] == two["check"]            # every number: scores summary, groups, testers, curves
    assert one["check"]["flagged_fraction"] > 0.1 and one["check"]["testers"]


def test_report_records_what_a_reproduction_needs(runs):
    prov = json.loads((runs["dir"] / "report1" / "report.json").read_text())["check"]["provenance"]
    missing = [k for k in REPRO_FIELDS if k not in prov]
    assert not missing, missing
    assert prov["model_sha256"] == sha256(runs["dir"] / "model.pt")
    assert prov["torch_num_threads"] >= 1
    aux = prov["aux_training"]
    for key in ("hidden", "epochs", "epochs_run", "lr", "batch_size_used", "weight_decay", "holdout", "patience",
                "seed", "n_train", "n_holdout", "output_space"):
        assert aux.get(key) is not None, key
    assert prov["packages"]["torch"] and prov["packages"]["numpy"]


def test_the_users_files_are_not_modified(runs):
    assert {p.name: sha256(p) for p in runs["inputs"]} == runs["before"]
    assert sorted(p.name for p in runs["dir"].iterdir() if p.is_file()) == sorted(
        ["data.csv", "model.pt", "policy.toml", "scores1.csv", "scores2.csv"])


def test_reproduced_in_this_process_too(runs, tmp_path):
    """A third run, in the test process, writes the same scores (same thread count: OMP_NUM_THREADS)."""
    from faux_checks_app.cli import main

    d = runs["dir"]
    data = shutil.copy(d / "data.csv", tmp_path / "data.csv")
    code = main(["check", "--model", str(d / "model.pt"), "--data", str(data), "--protected", "sex", "--label", "y",
                 "--policy", str(d / "policy.toml"), "--scores-out", str(tmp_path / "scores.csv")])
    assert code == 1
    assert (tmp_path / "scores.csv").read_bytes() == (d / "scores1.csv").read_bytes()
