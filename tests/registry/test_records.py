"""The registry record codec (faux_checks/registry/records.py): round trips, today's tags read back, the
write order the gate's crash safety depends on, parsing in one place, and the guard that no other library
module spells a ``fairness_*`` tag name."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from faux_checks.registry.records import (
    GATE_TAG,
    UNNAMED_ATTRIBUTE,
    UNNAMED_KEY,
    AttributeRecord,
    AuditAttributeRecord,
    AuditRecord,
    GateProvenance,
    GateRecord,
    VersionRecord,
    attribute_set_tags,
    parse_count,
    parse_number,
    parse_text,
    tag_value,
)

ROOT = Path(__file__).resolve().parents[2]

#: Version tags as a two-attribute gate of today writes them (read from a gated registry and trimmed).
TODAY = {
    "model_sha256": "ab" * 32, "model_file": "model.skops", "model_format": "skops",
    "fairness_started_at": "2026-12-03T10:00:00+00:00",
    "fairness_previous_gate": "failed at 2026-12-02T09:00:00+00:00 (δ=0.05, policy 0123456789ab)",
    "fairness_promotion": "pending", "fairness_policy_sha256": "cd" * 32, "fairness_policy_name": "adult-sex",
    "fairness_report_uri": "runs:/r1/report.html", "fairness_scores_uri": "runs:/r1/records/scores.parquet",
    "fairness_aux_model_uri": "", "fairness_compared_with": "", "fairness_churn_against": "2",
    "fairness_churn_newly_flagged": "12", "fairness_churn_resolved": "3", "fairness_churn_n": "48842",
    "fairness_evidence_uri": "runs:/r1/evidence.json", "fairness_evidence_signed": "false",
    "fairness_data_uri": "file:///data/adult.csv", "fairness_data_path": "/data/adult.csv",
    "fairness_data_sha256": "ef" * 32, "fairness_undecided_cause": "",
    "fairness_attributes": "sex,race", "fairness_deciding_attribute": "sex",
    "fairness_attr_sex_decision": "failed", "fairness_attr_sex_flagged_fraction": "0.3317",
    "fairness_attr_sex_flagged_fraction_lower": "0.3275", "fairness_attr_sex_flagged_fraction_upper": "0.3359",
    "fairness_attr_sex_aux_quality": "0.91", "fairness_attr_race_decision": "passed",
    "fairness_attr_race_flagged_fraction": "0.004", "fairness_attr_race_flagged_fraction_lower": "",
    "fairness_attr_race_flagged_fraction_upper": "", "fairness_attr_race_aux_quality": "0.7",
    "fairness_flagged_fraction": "0.3317", "fairness_flagged_fraction_lower": "0.3275",
    "fairness_flagged_fraction_upper": "0.3359", "fairness_confidence": "0.95", "fairness_aux_seed_spread": "nan",
    "fairness_delta": "0.05", "fairness_aux_quality": "0.91", "fairness_report": "/reports/v3/report.html",
    "fairness_run_id": "r1", "fairness_checked_at": "2026-12-03T10:01:00+00:00",
    "fairness_audit_flagged_fraction": "0.35", "fairness_audit_drifted_share": "0.25",
    "fairness_audit_data_path": "/data/current.csv", "fairness_audit_data_uri": "file:///data/current.csv",
    "fairness_audit_report_uri": "runs:/a1/report.html", "fairness_audit_reason": "flagged fraction rose 2.0 points",
    "fairness_audit_report": "/reports/a1/report.html", "fairness_audit_run_id": "a1",
    "fairness_audit_at": "2026-12-03T12:00:00+00:00", "fairness_audit": "failed",
    "fairness_gate": "failed",
}


def test_todays_tags_read_back_typed():
    record = VersionRecord.from_tags(TODAY)
    gate, audit = record.gate, record.audit
    assert record.state == record.decision == "failed" and record.promotion == "pending"
    assert record.previous_gate.startswith("failed at 2026-12-02") and record.extra["model_format"] == "skops"
    assert gate.flagged_fraction == 0.3317 and (gate.flagged_fraction_lower, gate.flagged_fraction_upper) == (0.3275, 0.3359)
    assert gate.confidence == 0.95 and gate.delta == 0.05 and gate.aux_quality == 0.91
    assert gate.aux_seed_spread is None                                   # "nan" is not a number to show
    assert gate.run_id == "r1" and gate.report == "/reports/v3/report.html"
    p = gate.provenance
    assert p.policy_sha256 == "cd" * 32 and p.data_path == "/data/adult.csv" and p.evidence_signed is False
    assert (p.churn_against, p.churn_newly_flagged, p.churn_resolved, p.churn_n) == ("2", 12, 3, 48842)
    assert isinstance(p.churn_newly_flagged, int) and p.compared_with is None and p.undecided_cause is None
    assert p.record_uris == {"scores": "runs:/r1/records/scores.parquet", "aux_model": None}
    assert gate.attributes == ("sex", "race") and gate.deciding_attribute == "sex"
    sex, race = gate.attribute("sex"), gate.attribute("race")
    assert (sex.decision, sex.flagged_fraction, sex.flagged_fraction_lower) == ("failed", 0.3317, 0.3275)
    assert (race.decision, race.flagged_fraction, race.flagged_fraction_lower) == ("passed", 0.004, None)
    assert gate.attribute("age") == AttributeRecord(key="age")           # absent: every field None
    assert (audit.decision, audit.flagged_fraction, audit.drifted_share, audit.run_id) == ("failed", 0.35, 0.25, "a1")
    assert audit.flow_tags and audit.reason.startswith("flagged fraction rose")


def test_todays_tags_round_trip_to_the_same_tags():
    """from_tags then to_tags gives the same tags back (a NaN spread is written "" once parsed: not a number)."""
    back = VersionRecord.from_tags(TODAY).to_tags()
    expected = {**TODAY, "fairness_aux_seed_spread": ""}
    assert back == expected
    assert list(back)[-1] == GATE_TAG


def test_gate_record_round_trip_is_exact_for_floats():
    third = 1 / 3
    record = GateRecord(decision="passed", flagged_fraction=third, flagged_fraction_lower=0.1 + 0.2,
                        flagged_fraction_upper=math.nextafter(0.5, 1), confidence=0.95, delta=0.05, aux_quality=None,
                        report="/r/report.html", run_id="abc", checked_at="2026-12-03T00:00:00+00:00",
                        provenance=GateProvenance(promotion="pending", policy_sha256="s", churn_n=7,
                                                  evidence_signed=True, record_uris={"scores": "runs:/abc/x"}))
    back = GateRecord.from_tags(record.to_tags())
    assert back.flagged_fraction == third and back.flagged_fraction_lower == 0.1 + 0.2
    assert back.flagged_fraction_upper == math.nextafter(0.5, 1) and back.aux_quality is None
    assert back.provenance.evidence_signed is True and back.provenance.churn_n == 7
    assert back.provenance.record_uris == {"scores": "runs:/abc/x"}
    assert back == GateRecord.from_tags(back.to_tags())                 # a fixed point after one trip


def test_the_flows_provenance_tags_keep_todays_names_and_write_order():
    """The order and names the gate flow wrote before the codec (flows/gate.py at be21ccb), None written ""."""
    tags = GateProvenance(promotion="none", record_uris={"scores": "runs:/r/records/scores.parquet", "policy": None},
                          evidence_signed=False, undecided_cause="").to_tags()
    assert list(tags) == [
        "fairness_promotion", "fairness_policy_sha256", "fairness_policy_name", "fairness_report_uri",
        "fairness_scores_uri", "fairness_policy_uri", "fairness_compared_with", "fairness_churn_against",
        "fairness_churn_newly_flagged", "fairness_churn_resolved", "fairness_churn_n", "fairness_evidence_uri",
        "fairness_evidence_signed", "fairness_data_uri", "fairness_data_path", "fairness_data_sha256",
        "fairness_undecided_cause"]
    assert tags["fairness_policy_uri"] == "" and tags["fairness_evidence_signed"] == "false"
    assert tags["fairness_promotion"] == "none" and tags["fairness_policy_sha256"] == ""


def test_gate_tag_is_written_last_and_extra_never_overrides_the_headline():
    """A gate killed while writing leaves the version 'running' (fairness_gate last); an extra tag named like a
    headline tag loses to the headline, as in DecisionTrail.record_decision before the codec."""
    tags = GateRecord(decision="failed", flagged_fraction=0.2, delta=0.05,
                      extra={"fairness_delta": "9", "fairness_gate": "passed", "model_x": 1}).to_tags()
    assert list(tags)[-1] == "fairness_gate" and tags["fairness_gate"] == "failed"
    assert tags["fairness_delta"] == "0.05" and tags["model_x"] == "1"
    assert list(tags).index("model_x") < list(tags).index("fairness_flagged_fraction")


#: Version tags as a one-attribute gate and audit wrote them with no attribute tags (the headline carries the
#: attribute's check), as stored: what the codec reads into the one shape, one attribute section.
UNNAMED_SHAPE = {
    "model_sha256": "ab" * 32, "fairness_promotion": "none", "fairness_policy_sha256": "cd" * 32,
    "fairness_policy_name": "adult-sex", "fairness_report_uri": "runs:/r7/report.html",
    "fairness_scores_uri": "runs:/r7/records/scores.parquet", "fairness_aux_model_uri": "runs:/r7/records/aux_model.pt",
    "fairness_data_path": "/data/adult.csv", "fairness_undecided_cause": "", "fairness_aux_key": "9f" * 32,
    "fairness_flagged_fraction": "0.1316", "fairness_flagged_fraction_lower": "0.1286",
    "fairness_flagged_fraction_upper": "0.1346", "fairness_confidence": "0.95", "fairness_aux_seed_spread": "",
    "fairness_delta": "0.05", "fairness_aux_quality": "0.8435", "fairness_report": "/reports/v7/report.html",
    "fairness_run_id": "r7", "fairness_checked_at": "2026-11-20T08:00:00+00:00",
    "fairness_audit_flagged_fraction": "0.1502", "fairness_audit_drifted_share": "0.1",
    "fairness_audit_data_path": "/data/current.csv", "fairness_audit_data_uri": "file:///data/current.csv",
    "fairness_audit_report_uri": "runs:/a7/report.html", "fairness_audit_reason": "all audit limits held",
    "fairness_audit_report": "/reports/a7/report.html", "fairness_audit_run_id": "a7",
    "fairness_audit_at": "2026-11-21T08:00:00+00:00", "fairness_audit": "passed",
    "fairness_gate": "failed",
}


def test_a_record_naming_no_attribute_reads_as_one_attribute_section():
    """The one shape from the codec alone: one attribute, the headline's decision and numbers in its record."""
    record = VersionRecord.from_tags(UNNAMED_SHAPE)
    gate, audit = record.gate, record.audit
    assert gate.attributes == (UNNAMED_ATTRIBUTE,) and gate.deciding_attribute == UNNAMED_ATTRIBUTE
    assert gate.by_attribute == (AttributeRecord(key=UNNAMED_KEY, decision="failed", flagged_fraction=0.1316,
                                                 flagged_fraction_lower=0.1286, flagged_fraction_upper=0.1346,
                                                 aux_quality=0.8435),)
    assert (gate.decision, gate.flagged_fraction, gate.run_id) == ("failed", 0.1316, "r7")     # the headline as stored
    assert gate.provenance.record_uris["scores"] == "runs:/r7/records/scores.parquet"
    assert not any(k.startswith("fairness_attr") for k in gate.extra)
    assert audit.attributes == (UNNAMED_ATTRIBUTE,)
    assert audit.by_attribute == (AuditAttributeRecord(key=UNNAMED_KEY, decision="passed", flagged_fraction=0.1502),)
    back = record.to_tags()                          # written back: no attribute tags invented by the reading
    assert not [k for k in back if k.startswith(("fairness_attr", "fairness_audit_attr", "fairness_deciding"))]
    assert {k: back[k] for k in UNNAMED_SHAPE} == UNNAMED_SHAPE
    from faux_checks.gate.sections import attribute_key

    assert attribute_key(UNNAMED_ATTRIBUTE) == UNNAMED_KEY


def test_a_record_of_one_named_attribute_reads_with_its_name():
    named = {**UNNAMED_SHAPE, **attribute_set_tags(("sex",), "sex", [AttributeRecord(
        key="sex", decision="failed", flagged_fraction=0.1316, aux_quality=0.8435)])}
    gate = VersionRecord.from_tags(named).gate
    assert gate.attributes == ("sex",) and gate.deciding_attribute == "sex"
    assert [(a.key, a.decision, a.flagged_fraction) for a in gate.by_attribute] == [("sex", "failed", 0.1316)]
    running = GateRecord.from_tags({**UNNAMED_SHAPE, "fairness_gate": "running"})    # re-gating: none decided yet
    assert running.by_attribute[0].decision is None and running.by_attribute[0].flagged_fraction == 0.1316
    assert GateRecord.from_tags({"fairness_gate": "running"}).attributes == ()       # never decided: no attribute


def test_attribute_tags_of_no_attribute_are_none_and_of_one_or_two_are_named():
    assert attribute_set_tags((), "sex", [AttributeRecord(key="sex")]) == {}
    assert len(attribute_set_tags(("sex",), "sex", [AttributeRecord(key="sex")])) == 2 + 5
    tags = attribute_set_tags(("sex", "race"), "race", [AttributeRecord(key="sex", decision="passed", flagged_fraction=0.01),
                                                        AttributeRecord(key="race", decision="failed")])
    assert tags["fairness_attributes"] == "sex,race" and tags["fairness_deciding_attribute"] == "race"
    assert tags["fairness_attr_sex_flagged_fraction"] == "0.01" and tags["fairness_attr_race_aux_quality"] == ""
    assert len(tags) == 2 + 2 * 5


def test_audit_record_cuts_the_reason_and_writes_its_decision_last():
    record = AuditRecord(decision="undecided", reason="x" * 1500, report="/a/report.html", run_id="a9", at="t",
                         flagged_fraction=0.1, attributes=("sex",),
                         by_attribute=(AuditAttributeRecord(key="sex", decision="undecided", increase=0.02),))
    tags = record.to_tags()
    assert len(tags["fairness_audit_reason"]) == 1000 and tags["fairness_audit_reason"].endswith("…")
    assert list(tags)[-1] == "fairness_audit" and tags["fairness_audit_attr_sex_increase"] == "0.02"
    back = AuditRecord.from_tags(tags)
    assert back.by_attribute[0].increase == 0.02 and back.flagged_fraction == 0.1 and back.attributes == ("sex",)
    direct = AuditRecord(decision="passed", reason="ok", flow_tags=False).to_tags()   # record_audit without the flow
    assert "fairness_audit_flagged_fraction" not in direct and set(direct) == {
        "fairness_audit_reason", "fairness_audit_report", "fairness_audit_run_id", "fairness_audit_at", "fairness_audit"}
    assert AuditRecord.from_tags(direct).flow_tags is False


@pytest.mark.parametrize("text, number", [("0.25", 0.25), ("1e-3", 0.001), ("5", 5.0), ("", None), ("None", None),
                                          (None, None), ("nan", None), ("inf", None), ("-inf", None), ("abc", None)])
def test_parse_number(text, number):
    assert parse_number(text) == number


def test_parse_count_text_and_tag_value():
    assert parse_count("12") == 12 and isinstance(parse_count("12"), int) and parse_count("1.5") == 1.5
    assert parse_count("") is None and parse_text("") is None and parse_text("None") is None and parse_text("x") == "x"
    assert tag_value(None) == "" and tag_value(True) == "true" and tag_value(0.1) == "0.1" and tag_value(3) == "3"
    assert float(tag_value(1 / 3)) == 1 / 3


def test_a_never_gated_or_running_version_has_no_gate_record():
    assert VersionRecord.from_tags({"model_sha256": "x"}).state is None
    running = VersionRecord.from_tags({"fairness_gate": "running", "fairness_started_at": "t"})
    assert running.state == "running" and running.decision is None and running.gate is None and running.audit is None


#: String literals beginning "fairness_" that are not tag names (a report section, a function's name).
NOT_TAG_NAMES = {("faux_checks/audit/fairness.py", "fairness_drift"), ("faux_checks/audit/drift.py", "fairness_drift"),
                 ("faux_checks/audit/drift.py", "fairness_drift."), ("faux_checks/report/html.py", "fairness_summary"),
                 ("faux_checks/report/html.py", "fairness_rows")}


def _fairness_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string literal or f-string head in ``path`` that begins with "fairness_"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            head = node.values[0].value
            if isinstance(head, str) and head.startswith("fairness_"):
                found.append((node.lineno, head))
            node.values[0].value = ""   # not counted again as a Constant below
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("fairness_"):
            found.append((node.lineno, node.value))
    return found


def test_no_library_module_but_the_codec_spells_a_fairness_tag_name():
    offenders = []
    for package in ("faux_checks", "faux_checks_app", "flows", "expectations"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "faux_checks/registry/records.py":
                continue
            offenders += [f"{rel}:{line} {text!r}" for line, text in _fairness_literals(path)
                          if (rel, text) not in NOT_TAG_NAMES]
    assert offenders == []


def test_the_guard_sees_plain_and_f_string_tag_names(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text('a = "fairness_gate"\nb = f"fairness_attr_{k}_decision"\nc = "not fairness_x"\n')
    assert _fairness_literals(sample) == [(1, "fairness_gate"), (2, "fairness_attr_")]
