"""The auxiliary model reused across processes: a gate's recorded model, restored by its key.

A restored model must be the model a new training gives: the same weights, quality, held-out ROC and scores, bit
for bit (the run that recorded it trained it on the same rows, protected values, encoding, settings and seed).
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch
from _support import UNFAIR, linear, make_data

from faux_checks.gate.aux_cache import aux_cache_stats, aux_store, clear_aux_cache
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import load_policy
from faux_checks.report.records import write_check_records


def _policy(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\n'
                 'max_flagged_fraction = 0.1\n[aux]\nepochs = 8\n[decision]\nmin_group_rows = 20\naux_seeds = 2\n')
    return load_policy(p)


def _recorded(tmp_path):
    data = make_data(1200, seed=1)
    policy = _policy(tmp_path)
    first = check_one_attribute(linear(UNFAIR), data, policy=policy)
    write_check_records(first, tmp_path / "records")
    clear_aux_cache()                                          # a new process: nothing trained here yet
    return data, policy, first


def test_a_recorded_model_is_restored_by_its_key_and_scores_bit_for_bit(tmp_path):
    data, policy, first = _recorded(tmp_path)
    key = first.provenance["aux_key"]
    assert len(key) == 64 and json.loads((tmp_path / "records" / "aux_model.json").read_text())["aux_key"] == key
    asked = []

    def lookup(k):
        asked.append(k)
        return (tmp_path / "records", "run abc123") if k == key else None

    with aux_store(lookup):
        second = check_one_attribute(linear(UNFAIR), data, policy=policy)
    assert aux_cache_stats()["restored"] == 1 and aux_cache_stats()["trainings"] == 1     # the extra seed is trained
    assert asked[0] == key and len(asked) == 2
    prov = second.provenance
    assert prov["aux_reused_from"] == "run abc123" and prov["aux_reused"] and prov["aux_key"] == key
    assert first.provenance["aux_reused_from"] is None and not first.provenance["aux_reused"]
    np.testing.assert_array_equal(second.scores, first.scores)
    np.testing.assert_array_equal(second.evidence.to_numpy(), first.evidence.to_numpy())
    assert second.interval == first.interval and second.aux_quality == first.aux_quality
    assert second.decision == first.decision and second.flagged_fraction == first.flagged_fraction
    np.testing.assert_array_equal(second.aux_model.holdout_[1], first.aux_model.holdout_[1])
    assert second.aux_model.holdout_loss_ == first.aux_model.holdout_loss_
    assert second.aux_model.epochs_run_ == first.aux_model.epochs_run_
    for a, b in zip(second.aux_model.net_.state_dict().values(), first.aux_model.net_.state_dict().values(), strict=False):
        assert torch.equal(a, b)
    from faux_checks.report.limitations import limitations

    texts = [s["text"] for s in limitations({"check": second.to_dict(), "decision": second.decision})]
    assert any("reused from run abc123" in t for t in texts), texts


def test_a_record_for_another_key_or_a_failing_lookup_trains_and_says_why(tmp_path, caplog):
    data, policy, first = _recorded(tmp_path)
    info = tmp_path / "records" / "aux_model.json"
    info.write_text(info.read_text().replace(first.provenance["aux_key"], "0" * 64))
    with caplog.at_level(logging.WARNING), aux_store(lambda k: (tmp_path / "records", "run abc123")):
        second = check_one_attribute(linear(UNFAIR), data, policy=policy)
    assert aux_cache_stats()["restored"] == 1 and aux_cache_stats()["trainings"] == 1   # the seed's record is intact
    assert second.provenance["aux_reused_from"] is None
    assert second.provenance["aux_seeds_reused_from"] == {"1": "run abc123"}
    assert "could not be reused" in caplog.text and "not " + repr(first.provenance["aux_key"]) in caplog.text
    np.testing.assert_array_equal(second.scores, first.scores)       # trained again: the same model anyway

    def broken(key):
        raise OSError("registry unreachable")

    clear_aux_cache()
    with aux_store(broken):
        third = check_one_attribute(linear(UNFAIR), data, policy=policy)
    assert aux_cache_stats()["trainings"] == 2 and third.provenance["aux_reused_from"] is None


def test_every_aux_seed_is_recorded_and_a_second_check_trains_none(tmp_path, monkeypatch):
    """The extra seeds' models are recorded by their keys; restored, no AuxiliaryModel.fit runs,
    and the seed spread is the same figure for figure."""
    from faux_checks.method.auxiliary import AuxiliaryModel

    data, policy, first = _recorded(tmp_path)
    keys = first.provenance["aux_seed_keys"]
    assert list(keys) == [str(policy.seed + 1)] and len(keys[str(policy.seed + 1)]) == 64
    info = json.loads((tmp_path / "records" / f"aux_model_seed{policy.seed + 1}.json").read_text())
    assert info["aux_key"] == keys[str(policy.seed + 1)] != first.provenance["aux_key"]
    known = {first.provenance["aux_key"], *keys.values()}
    fits = []
    real_fit = AuxiliaryModel.fit
    monkeypatch.setattr(AuxiliaryModel, "fit", lambda self, *a, **k: fits.append(1) or real_fit(self, *a, **k))
    with aux_store(lambda k: (tmp_path / "records", "run abc123") if k in known else None):
        second = check_one_attribute(linear(UNFAIR), data, policy=policy)
    assert fits == [] and aux_cache_stats()["trainings"] == 0 and aux_cache_stats()["restored"] == 2
    assert second.provenance["aux_seeds_reused_from"] == {str(policy.seed + 1): "run abc123"}
    assert second.interval.seeds == first.interval.seeds and second.interval == first.interval
    assert second.provenance["aux_seed_keys"] == keys
    clear_aux_cache()
    with aux_store(lambda k: None):                              # nothing recorded: both trained (the count is real)
        check_one_attribute(linear(UNFAIR), data, policy=policy)
    assert len(fits) == 2


@pytest.mark.slow
def test_a_second_gate_process_reuses_the_first_gates_model_from_the_registry(tmp_path, harness):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = Registry(uri)
    for name in ("a", "b"):
        save_torchscript(linear(UNFAIR), tmp_path / f"{name}.pt")
    reg.register_version("m", tmp_path / "a.pt")
    data = tmp_path / "audit.csv"
    make_data(800).to_csv(data, index=False)
    _policy(tmp_path)
    policy = tmp_path / "p.toml"
    common = ["--data", str(data), "--tracking-uri", uri, "--report-dir", str(tmp_path / "reports"), "--policy",
              str(policy)]
    assert main(["gate", "m", *common]) == 1
    first = reg.history("m")[0]
    clear_aux_cache()                                                # what a new process would start with
    reg.register_version("m", tmp_path / "b.pt")
    assert main(["gate", "m", *common]) == 1
    assert aux_cache_stats()["restored"] == 2 and aux_cache_stats()["trainings"] == 0   # the model and its extra seed
    second = reg.history("m")[0]
    report = json.loads(next((tmp_path / "reports").glob("m-v2*/report.json")).read_text())
    prov = report["check"]["provenance"]
    assert prov["aux_reused_from"] == f"run {first['fairness_run_id']}"
    assert second["fairness_flagged_fraction"] == first["fairness_flagged_fraction"]
    assert second["fairness_aux_quality"] == first["fairness_aux_quality"]
    assert second["fairness_aux_seed_spread"] == first["fairness_aux_seed_spread"]
    assert prov["aux_seeds_reused_from"] == {"1": f"run {first['fairness_run_id']}"}
