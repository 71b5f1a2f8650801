"""Version tags on an SQL store: one transaction per write, the same tags as one MLflow call per tag, all or none."""

from __future__ import annotations

import pytest
import torch

from faux_checks.registry import Registry
from faux_checks.registry import client as registry_client

NAME = "tags-model"


@pytest.fixture
def reg(tmp_path) -> Registry:
    registry = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}")
    path = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(3, 1)), str(path))
    for _ in range(2):
        registry.register_version(NAME, path)
    return registry


def _decide(reg: Registry, version: str) -> dict[str, str]:
    reg.mark_running(NAME, version)
    reg.record_decision(NAME, version, decision="failed", flagged_fraction=0.072, delta=0.05, aux_quality=0.91,
                        report_uri="file:///r", run_id="run-1", extra={"fairness_policy_sha256": "beef"},
                        interval={"lower": 0.05, "upper": 0.1, "confidence": 0.95, "seeds": {"spread": 0.01}})
    tags = dict(reg.client.get_model_version(NAME, version).tags)
    assert tags.pop("fairness_checked_at").endswith("+00:00") and tags.pop("fairness_started_at").endswith("+00:00")
    return tags


def test_one_transaction_writes_what_one_call_per_tag_writes(reg, monkeypatch):
    assert registry_client._sql_registry_store(reg.client) is not None     # sqlite: the one-transaction path
    batched = _decide(reg, "1")
    monkeypatch.setattr(registry_client, "_sql_registry_store", lambda client: None)   # an MLflow server's path
    assert _decide(reg, "2") == batched
    assert batched["fairness_gate"] == "failed" and float(batched["fairness_flagged_fraction"]) == 0.072
    assert float(batched["fairness_flagged_fraction_upper"]) == 0.1 and batched["fairness_policy_sha256"] == "beef"


def test_a_refused_tag_writes_none_and_a_written_tag_is_replaced(reg):
    from mlflow.exceptions import MlflowException

    reg._set_version_tags(NAME, "1", {"fairness_note": "first"})
    with pytest.raises(MlflowException):
        reg._set_version_tags(NAME, "1", {"fairness_note": "second", "k" * 300: "x"})
    tags = reg.client.get_model_version(NAME, "1").tags
    assert tags["fairness_note"] == "first" and "k" * 300 not in tags   # a key over 250 characters
    reg._set_version_tags(NAME, "1", {"fairness_note": "second", "fairness_gate": "passed"})
    tags = reg.client.get_model_version(NAME, "1").tags
    assert tags["fairness_note"] == "second" and tags["fairness_gate"] == "passed"
    with pytest.raises(MlflowException):
        reg._set_version_tags(NAME, "9", {"fairness_note": "x"})              # no such version: nothing written
