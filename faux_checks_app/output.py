"""What the command line prints for machines (``--json``), and keeping library output off stdout.

``--json`` prints **one JSON object per line** on stdout (JSON Lines), one per model version, and
nothing else: ``check`` and ``audit`` print one, ``gate`` one per version it gated (none when
nothing was new), ``history`` one per registered version. Progress, library logs (Prefect, Great
Expectations, MLflow) and errors go to stderr. Every object has these keys (docs/output.md, "Output for
machines"):

- ``schema_version`` (:data:`RESULT_SCHEMA_VERSION`), ``command`` (check / gate / audit / history);
- ``model``: ``name`` and ``version`` (registry), or ``path`` and ``sha256`` (``check``);
- ``decision`` (passed / failed / undecided; ``history``: the recorded one, None before any) and
  ``exit_code`` (0 / 1 / 2, None when there is no decision);
- ``reasons``: the rule that decided first, then the others;
- ``attributes``: one section per protected attribute (:func:`attribute_section`; several when the
  policy declares ``[[attributes]]``, in the policy's order): its flagged
  fraction with the interval, δ, the limit, the auxiliary model's quality and the per-group
  fractions; an audit's section holds the reference and current fractions and the KS test;
- ``report``: the absolute path of the run's ``report.json`` (None when there is none).

Command-specific keys: ``gate``: ``run_id``, ``promoted``; ``audit``: ``run_id``, ``drift``;
``history``: ``aliases``, ``checked_at``, ``last_audit``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator

from faux_checks.gate.decision import EXIT_CODES
from faux_checks.registry.records import GateProvenance, GateRecord, VersionRecord, parse_number

__all__ = ["RESULT_SCHEMA_VERSION", "attribute_section", "attribute_sections", "audit_object", "check_object", "emit_json",
           "gate_objects", "history_objects", "library_output_to_stderr", "terminal_text"]

RESULT_SCHEMA_VERSION = 1


def terminal_text(value, *, keep_newlines: bool = False) -> str:
    """``value`` as the terminal may show it: every control character written as an escape.

    Whatever the CLI prints that comes from data (column names and group values in reasons, registry
    tags, a report file's fields) goes through here: an ESC sequence or a carriage return in a column
    name, printed raw, could redraw a failed check as "passed"; through here it reads ``\\x1b[1A\\r``. Line breaks are
    escaped too unless ``keep_newlines`` (a message whose line breaks are ours).
    :func:`faux_checks.report._format.printable` lists the characters. ``--json`` needs nothing
    more: JSON escapes them.
    """
    from faux_checks.report._format import printable

    return printable(value, keep_newlines=keep_newlines)


_number = parse_number   # a number, None when missing, not a number or not finite


def attribute_section(check: dict | None, *, protected: str | None = None, components: Iterable[str] = (),
                      cells: Iterable[dict] = ()) -> dict[str, Any]:
    """One protected attribute's numbers from a check dict (:meth:`CheckResult.to_dict`, a report's ``check``).

    Returns
    -------
    dict
        ``protected`` (the attribute; an intersection reads ``sex×race``), ``kind`` (binary /
        multiclass / continuous), ``components`` (an intersection's columns, else empty), ``cells``
        (an intersection's cells, :func:`faux_checks.gate.attributes.intersection_cells`), ``decision``, ``flagged_fraction`` (share of audited individuals, undefined
        counted as flagged), ``flagged_fraction_lower`` / ``flagged_fraction_upper`` (its interval at
        ``confidence``), ``flagged_fraction_defined``, ``delta`` (probability points),
        ``max_flagged_fraction``, ``n_individuals``, ``n_undefined``, ``aux_quality``,
        ``aux_quality_metric``, ``by_group`` (``group``, ``n``, ``flagged_fraction``), ``testers``
        (``name -> statistic, value, limit, gating, passed``). Values not computed are None.
    """
    check = check or {}
    prov = check.get("provenance") or {}
    interval = check.get("interval") or {}
    return {
        "protected": protected or (prov.get("policy") or {}).get("protected"),
        "kind": prov.get("protected_kind"),
        "components": list(components),
        "cells": list(cells),
        "decision": check.get("decision"),
        "flagged_fraction": check.get("flagged_fraction"),
        "flagged_fraction_lower": interval.get("lower"),
        "flagged_fraction_upper": interval.get("upper"),
        "confidence": interval.get("confidence"),
        "flagged_fraction_defined": check.get("flagged_fraction_defined"),
        "delta": check.get("delta"),
        "max_flagged_fraction": check.get("max_flagged_fraction"),
        "n_individuals": check.get("n_individuals"),
        "n_undefined": check.get("n_undefined"),
        "aux_quality": check.get("aux_quality"),
        "aux_quality_metric": check.get("aux_quality_metric"),
        "by_group": [{"group": g.get("group"), "n": g.get("n"), "flagged_fraction": g.get("flagged_fraction")}
                     for g in check.get("by_group") or []],
        "testers": {name: {k: t.get(k) for k in ("statistic", "value", "limit", "gating", "passed")}
                    for name, t in (check.get("testers") or {}).items()},
    }


def attribute_sections(payload: dict | None) -> list[dict]:
    """The ``attributes`` list of a result or report dict: one section per protected attribute (several when the policy
    declares ``[[attributes]]``: :func:`faux_checks.gate.attributes.section_dict`), else the one of its ``check``."""
    payload = payload or {}
    several = payload.get("attributes") or []
    if several:
        out = []
        for a in several:
            section = attribute_section(a.get("check"), protected=a.get("attribute"),
                                        components=a.get("components") or (), cells=a.get("cells") or ())
            section["decision"] = a.get("decision")            # 'undecided' when its check could not run
            section["kind"] = a.get("kind") or section["kind"]
            out.append(section)
        return out
    check = payload.get("check") if "check" in payload else payload
    return [attribute_section(check)] if check else []


def _base(command: str, model: dict, decision: str | None, reasons: list[str], attributes: list[dict],
          report: str | None) -> dict[str, Any]:
    return {"schema_version": RESULT_SCHEMA_VERSION, "command": command, "model": model, "decision": decision,
            "exit_code": EXIT_CODES.get(decision), "reasons": list(reasons or []), "attributes": attributes,
            "report": report}


def _report_json(path_or_dir) -> tuple[dict | None, str | None]:
    """The report dict and the absolute path of report.json, from a report folder or a file beside it."""
    if not path_or_dir or str(path_or_dir) in ("None", ""):
        return None, None
    path = Path(str(path_or_dir))
    path = path if path.name == "report.json" else (path / "report.json" if path.is_dir() or not path.suffix
                                                    else path.with_name("report.json"))
    try:
        return json.loads(path.read_text()), str(path.resolve())
    except (OSError, json.JSONDecodeError):
        return None, None


def check_object(result: dict, *, model_path: str, model_sha256: str | None, report_dir: str | None) -> dict:
    """``check --json``: the one object of a check (``result``: :meth:`CheckResult.to_dict`)."""
    report = str((Path(report_dir) / "report.json").resolve()) if report_dir else None
    return _base("check", {"path": str(Path(model_path).resolve()), "sha256": model_sha256},
                 result.get("decision"), result.get("reasons") or [], attribute_sections(result), report)


def gate_objects(model_name: str, outcomes: list[dict]) -> list[dict]:
    """``gate --json``: one object per gated version (``outcomes``: the gate flow's list of version outcomes)."""
    out = []
    for o in outcomes:
        report, path = _report_json(o.get("report_dir"))
        sections = attribute_sections({"check": (report or {}).get("check"), "attributes": (report or {}).get("attributes")})
        obj = _base("gate", {"name": o.get("model_name") or model_name, "version": str(o.get("version"))},
                    o.get("decision"), o.get("reasons") or [], sections, path)
        obj.update({"run_id": o.get("run_id"), "promoted": bool(o.get("promoted"))})
        out.append(obj)
    return out


def gate_error_object(model_name: str, message: str) -> dict:
    """``gate --json`` when the flow raised before deciding any version: one undecided object, version None."""
    obj = _base("gate", {"name": model_name, "version": None}, "undecided", [message], [], None)
    obj.update({"run_id": None, "promoted": False})
    return obj


def audit_object(model_name: str, summary: dict, fallback_reason: str) -> dict:
    """``audit --json``: the audit's object (``summary``: the audit flow's result dict, may be empty).

    Its ``attributes`` hold one section per protected attribute (the report's ``attributes`` when the
    policy declares several), each with that attribute's reference/current flagged fractions, KS
    test, auxiliary model and ``by_group_drift``; ``decision`` there is the attribute's own audit outcome.
    """
    report, path = _report_json(summary.get("report_dir"))
    audit = (report or {}).get("audit") or {}
    fairness = audit.get("fairness") or {}
    sections = []
    if report is not None and report.get("attributes"):  # several attributes: one section each, its own drift
        for section, a in zip(attribute_sections(report), report["attributes"], strict=True):
            own = a.get("audit") or {}
            section.update({k: own.get(k) for k in ("flagged_fraction_reference", "flagged_fraction_current",
                                                   "increase", "ks_statistic", "ks_pvalue", "aux_model")})
            section["by_group_drift"] = own.get("by_group") or []
            sections.append(section)
    elif report is not None:
        section = attribute_section((report or {}).get("check"))
        section.update({k: fairness.get(k) for k in ("flagged_fraction_reference", "flagged_fraction_current",
                                                    "increase", "ks_statistic", "ks_pvalue", "aux_model")})
        section["by_group_drift"] = fairness.get("by_group") or []
        sections.append(section)
    decision = summary.get("decision") or "undecided"
    drift = audit.get("drift") or {}
    obj = _base("audit", {"name": summary.get("model_name") or model_name, "version": summary.get("version")},
                decision, summary.get("reasons") or [fallback_reason], sections, path)
    obj.update({"run_id": summary.get("run_id"),
                "drift": {k: drift.get(k) for k in ("n_compared", "n_drifted", "drifted_share")} if drift else None})
    return obj


def history_objects(model_name: str, rows: list[dict], audits: list[dict]) -> list[dict]:
    """``history --json``: one object per registered version, from its registry tags (and its report, if readable)."""
    out = []
    for r in rows:
        version = str(r.get("version"))
        record = VersionRecord.from_tags(r)
        decision, gate = record.state, record.gate or GateRecord(decision=record.state)
        decided = decision if decision in EXIT_CODES else None
        report, path = _report_json(gate.report)
        check = (report or {}).get("check")
        if check:
            sections = attribute_sections({"check": check, "attributes": report.get("attributes")})
        else:   # the tags alone: what every recorded decision carries
            sections = [{"protected": None, "kind": None, "components": [], "cells": [], "decision": decided,
                       "flagged_fraction": gate.flagged_fraction, "flagged_fraction_lower": gate.flagged_fraction_lower,
                       "flagged_fraction_upper": gate.flagged_fraction_upper, "confidence": gate.confidence,
                       "delta": gate.delta, "aux_quality": gate.aux_quality, "by_group": [], "testers": {}}]
        mine = [a for a in audits if str(a.get("version")) == version]
        last = mine[-1] if mine else None
        obj = _base("history", {"name": model_name, "version": version}, decided,
                    (report or {}).get("reasons") or [], sections if decided or check else [], path)
        obj.update({"status": decision, "aliases": list(r.get("aliases") or []),
                    "checked_at": gate.checked_at,
                    "policy_sha256": (gate.provenance or GateProvenance()).policy_sha256,
                    "previous_gate": record.previous_gate,
                    "last_audit": None if last is None else {"decision": last.get("decision"),
                                                            "at": last.get("started_at"),
                                                            "run_id": last.get("run_id")}})
        out.append(obj)
    return out


def emit_json(objects: Iterable[dict], stream=None) -> None:
    """Write each object as one line of JSON (no NaN: a value not computed is null)."""
    stream = stream or sys.stdout
    for obj in objects:
        stream.write(json.dumps(obj, allow_nan=False, default=str) + "\n")
    stream.flush()


@contextlib.contextmanager
def library_output_to_stderr() -> Iterator[None]:
    """While active, whatever the libraries write to stdout goes to stderr: ``print`` (Prefect's ``log_prints``,
    Great Expectations), logging handlers bound to the original stdout, and child processes started meanwhile
    (file descriptor 1 points at stderr). The command's own result is printed after it ends."""
    sys.stdout.flush()
    real = sys.stdout
    saved = None
    try:
        fd, err_fd = real.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):   # a stream without a descriptor (e.g. pytest's capsys)
        fd = err_fd = None
    if fd is not None and fd != err_fd:
        saved = os.dup(fd)
        os.dup2(err_fd, fd)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        try:
            real.flush()
        finally:
            if saved is not None:
                os.dup2(saved, fd)
                os.close(saved)
