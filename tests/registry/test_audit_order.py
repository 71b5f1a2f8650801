"""Audits of one version are recorded in the order of their data and start, never of their finish.

A scheduled audit reading a batch refreshed in place can finish after a later run that read a newer copy;
the version must keep the newer result (``fairness_audit``, its run id). Unit tests of the order
(:func:`faux_checks.registry.audit_order.is_older`), then the registry: two audits written in the wrong order.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

from faux_checks.registry.audit_order import instant, is_older  # noqa: E402
from faux_checks.registry.records import AuditRecord  # noqa: E402

T1, T2 = "2026-12-01T10:00:00.000001+00:00", "2026-12-01T10:01:00+00:00"
S1, S2 = "2026-12-01T10:02:00+00:00", "2026-12-01T10:03:00+00:00"


def _audit(decision="passed", data_at=None, started_at=None, run_id=None) -> AuditRecord:
    return AuditRecord(decision=decision, run_id=run_id, data_at=data_at, started_at=started_at)


def test_older_data_never_replaces_newer_data_whatever_the_start():
    newer = _audit("failed", data_at=T2, started_at=S1)
    older_started_later = _audit("passed", data_at=T1, started_at=S2)
    assert is_older(older_started_later, newer) is True
    assert is_older(newer, older_started_later) is False


def test_same_data_is_ordered_by_start():
    assert is_older(_audit(data_at=T1, started_at=S1), _audit(data_at=T1, started_at=S2)) is True
    assert is_older(_audit(data_at=T1, started_at=S2), _audit(data_at=T1, started_at=S1)) is False
    assert is_older(_audit(data_at=T1, started_at=S1), _audit(data_at=T1, started_at=S1)) is False   # equal: replaced


def test_what_cannot_be_ordered_is_replaced():
    assert is_older(_audit(data_at=T1, started_at=S1), None) is False
    assert is_older(_audit(data_at=T1, started_at=S1), AuditRecord(decision=None)) is False      # never audited
    assert is_older(_audit(data_at=T1, started_at=S1), _audit()) is False                        # a direct call's
    assert is_older(_audit(), _audit(data_at=T2, started_at=S2)) is False                        # nothing to compare
    assert is_older(_audit(data_at=T1), _audit(started_at=S2)) is False


def test_times_are_compared_as_instants_not_text():
    assert instant("2026-12-01T11:00:00+01:00") == instant("2026-12-01T10:00:00+00:00")
    assert instant("2026-12-01T10:00:00") == instant("2026-12-01T10:00:00+00:00")        # no zone: UTC
    assert instant("") is None and instant("yesterday") is None and instant(None) is None
    # the later instant written in another zone sorts first as text
    assert is_older(_audit(data_at="2026-12-01T10:30:00+00:00"), _audit(data_at="2026-12-01T11:00:00+00:30")) is False


def test_tags_round_trip():
    tags = AuditRecord(decision="passed", reason="ok", data_at=T1, started_at=S1, flow_tags=False).to_tags()
    assert tags["fairness_audit_data_at"] == T1 and tags["fairness_audit_started_at"] == S1
    assert list(tags)[-1] == "fairness_audit"
    back = AuditRecord.from_tags(tags)
    assert (back.data_at, back.started_at, back.extra) == (T1, S1, {})
    assert "fairness_audit_data_at" not in AuditRecord(decision="passed", reason="ok", flow_tags=False).to_tags()


# ----------------------------------------------------------------------------- the registry
@pytest.fixture
def registry(tmp_path, monkeypatch):
    import torch

    from faux_checks.registry import Registry

    monkeypatch.chdir(tmp_path)
    reg = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}")
    model = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 1)), str(model))
    reg.register_version("credit", model)
    return reg


def _record(reg, tmp_path: Path, decision: str, data_at: str, started_at: str) -> str:
    folder = tmp_path / f"report-{decision}-{started_at[11:19].replace(':', '')}"
    folder.mkdir()
    (folder / "report.html").write_text(f"<html>{decision}</html>")
    run_id = reg.log_audit_run("credit", "1", report_dir=folder, metrics={}, params={}, tags={"decision": decision})
    standing = reg.record_audit("credit", "1", decision=decision, reason=f"{decision} rule",
                                report_uri=str(folder / "report.html"), run_id=run_id, data_at=data_at,
                                started_at=started_at)
    return run_id, standing


def test_an_older_snapshot_finishing_last_does_not_overwrite(registry, tmp_path):
    # run A started first on the batch written at T1; run B started later on the batch written at T2 and finished
    # first: A's write comes last and must leave B's audit on the version
    run_b, standing_b = _record(registry, tmp_path, "failed", data_at=T2, started_at=S2)
    run_a, standing_a = _record(registry, tmp_path, "passed", data_at=T1, started_at=S1)
    assert standing_b is None
    assert standing_a is not None and standing_a.run_id == run_b and standing_a.decision == "failed"
    tags = registry._version("credit", "1").tags
    assert tags["fairness_audit"] == "failed" and tags["fairness_audit_run_id"] == run_b
    assert tags["fairness_audit_data_at"] == T2 and tags["fairness_audit_reason"] == "failed rule"
    older = registry.client.get_run(run_a).data.tags
    assert older["fairness_run_state"] == "decided" and older["fairness_superseded_by"] == run_b
    assert [r["run_id"] for r in registry.audit_runs("credit")] == [run_b, run_a]   # both in the history


def test_a_newer_snapshot_replaces_the_older(registry, tmp_path):
    run_a, _ = _record(registry, tmp_path, "passed", data_at=T1, started_at=S1)
    run_b, standing = _record(registry, tmp_path, "failed", data_at=T2, started_at=S2)
    assert standing is None
    tags = registry._version("credit", "1").tags
    assert tags["fairness_audit"] == "failed" and tags["fairness_audit_run_id"] == run_b
    assert tags["fairness_audit_started_at"] == S2

