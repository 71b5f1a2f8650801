"""The gate suite: built from the policy, validated on a DataFrame, stored as JSON.

The suite's gate expectation (:class:`~faux_checks_gx.faux.ExpectFauxGateToPass`) records the library's
decision over every protected attribute (:func:`faux_checks.gate.attributes.gate_of_checks` of the fAux
checks); :func:`validate_frame` carries it as it is. What GX adds can only lower it, decided with the
gate's engine (:func:`faux_checks.gate.decision.decide`) over the library's rules and these rows: a
failing gating baseline expectation, a foreign expectation someone added (gating), and a ``not computed``
row for an expectation that raised or lacks its metric. It fails closed: no fAux or gate expectation, or
an ``undecided`` check, give ``"undecided"``, never ``"passed"``.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import great_expectations as gx
import pandas as pd

from faux_checks.errors import InputError
from faux_checks.gate.decision import Outcome, rule_row
from faux_checks.gate.policy import Policy

from .faux import ExpectFauxFlaggedFractionToBeAtMost, ExpectFauxGateToPass, anchor_column
from .testers import SHIPPED_EXPECTATIONS, expectation_for, tester_expectation

__all__ = ["SuiteOutcome", "build_suite", "validate_frame", "save_suite", "load_suite", "TESTER_EXPECTATIONS"]

logger = logging.getLogger(__name__)

FAUX_TYPE = ExpectFauxFlaggedFractionToBeAtMost.expectation_type
GATE_TYPE = ExpectFauxGateToPass.expectation_type
#: The shipped testers' expectation classes (a registered tester's is :func:`.testers.tester_expectation`).
TESTER_EXPECTATIONS = SHIPPED_EXPECTATIONS


def _is_ours(kind: str) -> bool:
    """Whether ``kind`` is the fAux expectation or a tester's of the table (shipped or built from an entry)."""
    from faux_checks.gate.tester_table import TESTERS

    if kind in (FAUX_TYPE, GATE_TYPE):
        return True
    for name in TESTERS:
        try:
            if tester_expectation(name).expectation_type == kind:
                return True
        except InputError:
            continue
    return False


@dataclass(frozen=True)
class SuiteOutcome(Outcome):
    """The gate's reading of one GX validation.

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
        The library's reasons (the rule that produced the decision first), the rows GX added that lowered
        it, then notes on non-gating baseline failures.
    check : dict or None
        ``CheckResult.to_dict()`` of the attribute that decided (the first whose own decision is the
        suite's); None when no check ran.
    expectations : list of dict
        Per expectation: ``type``, ``success``, ``observed_value``, ``gating``, ``exception``.
    gx_success : bool
        GX's overall success flag (every expectation successful, gating or not).
    rules : list of dict
        The rule rows the engine decided from (the report's rules table).
    attributes : list of dict
        One section per protected attribute (:func:`faux_checks.gate.sections.section_dict`), in the policy's
        order, as the gate expectation recorded them; empty when it did not run.
    library : dict or None
        The library's decision as the gate expectation recorded it (``decision``, ``reasons``, ``rules``,
        ``attributes``); None when it did not run.
    policy : dict or None
        The whole policy (JSON form), set by the caller that expanded it (``faux_checks_flows.gate.validate``);
        each check records its own attribute's policy.
    gx_result : dict or None
        GX's validation result as JSON (``ExpectationSuiteValidationResult.to_json_dict()``); None
        when GX did not run.
    regression : list of dict
        The gate's comparison of this version with the deployed and the previous version, per individual
        (:func:`faux_checks_flows.regression.against_earlier`); empty outside a gate run.
    """

    decision: str
    reasons: list[str]
    check: dict | None
    expectations: list[dict] = field(default_factory=list)
    gx_success: bool = False
    rules: list[dict] = field(default_factory=list)
    attributes: list[dict] = field(default_factory=list)
    library: dict | None = None
    policy: dict | None = None
    gx_result: dict | None = None
    regression: list[dict] = field(default_factory=list)



# ---------------------------------------------------------------------------------- build
def build_suite(
    policy: Policy,
    *,
    model_path: str,
    feature_spec_path: str | None = None,
    aux_model_path: str | None = None,
    name: str = "fairness-gate",
) -> gx.ExpectationSuite:
    """One fAux expectation plus one expectation per enabled baseline tester, per protected attribute of the policy,
    then the gate expectation that records the library's decision over them all.

    With ``[protected_probabilities]`` (c given as per-row probabilities, no c column in the batch) the fAux
    expectation anchors on the first probability column (:func:`~faux_checks_gx.faux.anchor_column`) and runs the
    multiple imputation (:func:`faux_checks.gate.estimated.check_estimated`); the baseline testers run inside each
    draw's check and are read over the draws there (:func:`faux_checks.gate.estimated.draw_rules`), so no separate
    tester expectation is built.

    Each attribute (and intersection) has its own expectations,
    built from its single-attribute policy (:meth:`Policy.attribute_policies`); the column of an
    intersection (``sex×race``) must be in the validated frame
    (:func:`faux_checks.gate.attributes.add_intersections`).

    Parameters
    ----------
    policy : Policy
    model_path : str
        Target model file (TorchScript / torch.export).
    feature_spec_path, aux_model_path : str, optional
    name : str
        Suite name.

    Returns
    -------
    great_expectations.ExpectationSuite
        Not bound to any data context.

    Raises
    ------
    InputError
        A tester that reads the label (``equalized_odds``) is enabled but the policy names no label column,
        or an enabled tester is a group metric with no expectation (:func:`.testers.tester_expectation`).
    """
    expectations: list[Any] = []
    for one in policy.attribute_policies().values():
        expectations += _attribute_expectations(one, model_path, feature_spec_path, aux_model_path)
    expectations.append(ExpectFauxGateToPass(
        model_path=str(model_path), feature_spec_path=None if feature_spec_path is None else str(feature_spec_path),
        aux_model_path=None if aux_model_path is None else str(aux_model_path), policy_json=policy.model_dump_json()))
    return gx.ExpectationSuite(name=name, expectations=expectations)


def _attribute_expectations(policy: Policy, model_path: str, feature_spec_path: str | None,
                            aux_model_path: str | None) -> list[Any]:
    """The fAux expectation and the enabled baseline testers' of a single-attribute policy."""
    # every expectation names the same model, spec, aux model and policy: the baselines' metrics depend on
    # the fAux expectation's faux.check with these exact kwargs, so GX runs the check once and they read it
    common = {"column": anchor_column(policy), "model_path": str(model_path),
              "feature_spec_path": None if feature_spec_path is None else str(feature_spec_path),
              "aux_model_path": None if aux_model_path is None else str(aux_model_path),
              "policy_json": policy.model_dump_json()}
    expectations: list[Any] = [ExpectFauxFlaggedFractionToBeAtMost(
        **common, max_flagged_fraction=policy.faux.max_flagged_fraction)]
    if policy.protected_probabilities is not None:
        return expectations       # no c column to group by: each draw's testers are in the check (read over the draws)
    for tester, settings in policy.testers.items():
        if settings.enabled:          # the class from the tester table (shipped, or built from the entry)
            expectations.append(expectation_for(tester, settings, label=policy.label, **common))
    return expectations


# ---------------------------------------------------------------------------------- validate
def validate_frame(frame: pd.DataFrame, suite: gx.ExpectationSuite) -> SuiteOutcome:
    """Validate ``frame`` against ``suite`` in an ephemeral GX context and decide.

    Parameters
    ----------
    frame : DataFrame
        The audit rows (whole table: features, protected column, label). Not modified.
    suite : ExpectationSuite
        From :func:`build_suite` or :func:`load_suite`; not modified (a copy is validated).

    With ``[protected_file]`` in the suite's policy and the protected column(s) absent from ``frame``, c is joined
    by the key first (:func:`faux_checks.gate.unmatched.gate_rows`, the gate flow's join: unmatched rows refused;
    intersections derived after it); either way each check's provenance states the linked file
    (``protected_file``: key, columns, rows, none unmatched), so the report names the form of c.

    Returns
    -------
    SuiteOutcome
        ``undecided`` when the suite is empty or lacks the fAux expectation, when any
        expectation raised or lacks its metric, or when the fAux check is undecided;
        ``failed`` when the fAux expectation or a gating baseline is unsuccessful;
        ``passed`` otherwise. Never raises for bad data or models: those are ``undecided``.
    """
    configs = [e.configuration for e in suite.expectations]
    if not configs:
        return SuiteOutcome("undecided", [f"suite '{suite.name}' has no expectations; nothing was checked"], None)
    if not any(c.type == FAUX_TYPE for c in configs):
        present = sorted({c.type for c in configs})
        return SuiteOutcome("undecided", [f"suite '{suite.name}' has no {FAUX_TYPE} expectation (found {present}); "
                                          "the gate needs the fAux check"], None)
    try:
        frame, linked = _linked_batch(frame, configs)
    except Exception as exc:  # noqa: BLE001 - a join that cannot be made is no pass: fail closed, say why
        return SuiteOutcome("undecided", [f"the protected file could not be joined: {exc}"], None)
    try:
        result = _run_gx(frame, suite.name, configs)
    except Exception as exc:  # GX itself failed: fail closed, say why
        logger.exception("GX validation could not run")
        return SuiteOutcome("undecided", [f"GX validation could not run: {type(exc).__name__}: {exc}"], None)
    try:
        return replace(_with_link(_decide(result), linked), gx_result=_json_result(result))
    except Exception as exc:  # a result we cannot read is no pass either
        logger.exception("GX validation result could not be read")
        return SuiteOutcome("undecided", [f"GX validation result could not be read: {type(exc).__name__}: {exc}"],
                            None)


def _linked_batch(frame: pd.DataFrame, configs: list) -> tuple[pd.DataFrame, dict | None]:
    """With ``[protected_file]`` in the gate expectation's policy: the batch with c joined when it lacks it, and the
    link as a check's provenance records it (:meth:`faux_checks.inputs.linked.LinkedRows.to_dict`); else
    ``(frame, None)``.

    Raises
    ------
    ConfigurationError
        :func:`faux_checks.gate.unmatched.gate_rows`'s (unmatched rows, ``unmatched = "exclude"``, key trouble).
    """
    gate = next((c for c in configs if c.type == GATE_TYPE), None)
    try:
        policy = Policy.model_validate_json(gate.kwargs["policy_json"]) if gate is not None else None
    except Exception:  # noqa: BLE001 - a policy that does not load is the gate expectation's to report (undecided)
        policy = None
    if policy is None or policy.protected_file is None:
        return frame, None
    columns = [a.column for a in policy.attributes]
    if any(c not in frame.columns for c in columns):
        from faux_checks.gate.attributes import add_intersections
        from faux_checks.gate.unmatched import gate_rows

        frame = add_intersections(gate_rows(frame, policy, audit_name="the validated batch"), policy)
    return frame, {"join_on": policy.protected_file.join_on, "protected": columns, "rows": len(frame),
                   "matched": len(frame), "unmatched": 0, "unmatched_share": 0.0, "unmatched_rows": []}


def _with_link(outcome: SuiteOutcome, linked: dict | None) -> SuiteOutcome:
    """Each check of ``outcome`` with the linked file in its provenance (``protected_file``); unchanged without one."""
    if linked is None:
        return outcome

    def mark(check: dict | None) -> dict | None:
        return None if not check else {**check, "provenance": {**(check.get("provenance") or {}),
                                                               "protected_file": linked}}

    return replace(outcome, check=mark(outcome.check),
                   attributes=[{**a, "check": mark(a.get("check"))} for a in outcome.attributes])


def _json_result(result) -> dict | None:
    """GX's validation result as plain JSON (best effort: None when it cannot be serialised)."""
    try:
        return json.loads(json.dumps(result.to_json_dict(), default=str))
    except Exception:  # the record is evidence, not part of the decision
        logger.warning("GX validation result could not be serialised", exc_info=True)
        return None


def _run_gx(frame: pd.DataFrame, suite_name: str, configs: list) -> Any:
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    asset = context.data_sources.add_pandas("faux_checks").add_dataframe_asset("audit")
    batch_definition = asset.add_batch_definition_whole_dataframe("all_rows")
    # A fresh copy: an Expectation belongs to one suite, a suite to one context.
    copies = [c.to_domain_obj() for c in configs]
    for expectation in copies:
        expectation.id = None
    fresh = context.suites.add(gx.ExpectationSuite(name=suite_name, expectations=copies))
    if len(fresh.expectations) != len(configs):
        raise InputError(f"GX kept {len(fresh.expectations)} of {len(configs)} expectations of suite '{suite_name}'")
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"gate-{uuid.uuid4().hex[:8]}", data=batch_definition, suite=fresh))
    return definition.run(batch_parameters={"dataframe": frame}, result_format="SUMMARY")


def _exception_message(info: Any) -> str | None:
    """GX's exception_info is either flat or keyed by metric id; return the first message raised."""
    if not info:
        return None
    if "raised_exception" in info:
        return (info.get("exception_message") or "unknown error") if info.get("raised_exception") else None
    for value in info.values():
        if isinstance(value, dict) and value.get("raised_exception"):
            return value.get("exception_message") or "unknown error"
    return None


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)


def _decide(result) -> SuiteOutcome:
    """The library's decision recorded by the gate expectation, lowered only by the rows GX adds (module docstring)."""
    from faux_checks.gate.decision import Decision, decide

    columns = list(dict.fromkeys(r.expectation_config.kwargs.get("column") for r in result.results
                                 if r.expectation_config.type == FAUX_TYPE))
    several = len(columns) > 1
    rows: list[dict] = []
    added: list[dict] = []
    raised: dict[str, list[str]] = {}  # exception message -> expectation types that raised it
    notes: list[str] = []
    gate: dict | None = None
    checks: dict = {}
    for r in result.results:
        kind, config = r.expectation_config.type, r.expectation_config
        column = config.kwargs.get("column")
        res = r.result or {}
        details = res.get("details") or {}
        # fAux and the gate always gate; a foreign expectation someone added to the suite gates too (fail closed)
        gating = True if kind in (FAUX_TYPE, GATE_TYPE) else bool(config.kwargs.get("gating", not _is_ours(kind)))
        error = _exception_message(r.exception_info)
        rows.append({"type": kind, "success": bool(r.success), "observed_value": res.get("observed_value"),
                     "gating": gating, "exception": error})
        if error is not None:
            raised.setdefault(f"{column}: {error}" if several and column else error, []).append(kind)
        elif details.get("metric_missing"):
            added.append(rule_row(kind, "not computed", f"{kind}: {(details.get('reasons') or ['its metric is missing'])[0]}"))
        elif kind == GATE_TYPE:
            gate = details.get("gate")
        elif kind == FAUX_TYPE:
            checks[column] = details.get("check")    # its decision is the library's to combine (the gate's)
        elif not r.success:
            msg = f"{kind}: observed {_fmt(res.get('observed_value'))} exceeds its limit {_fmt(details.get('limit'))}"
            if gating:
                added.append(rule_row(kind, "exceeded", f"gating {msg}", res.get("observed_value"), details.get("limit")))
            else:
                notes.append(f"{column}: non-gating, reported only: {msg}" if several else
                             f"non-gating, reported only: {msg}")
    added = [rule_row("expectation raised", "not computed", f"{msg} (raised by {', '.join(kinds)})")
             for msg, kinds in raised.items()] + added
    if gate is None and not added:
        added = [rule_row(GATE_TYPE, "not computed", f"the suite recorded no library decision ({GATE_TYPE}); "
                          "rebuild the suite from the policy (faux_checks_gx.build_suite)")]
    library = Decision(gate["decision"], list(gate["reasons"]), list(gate["rules"])) if gate else None
    outcome = library if library is not None and not added else decide([*added, *(library.rules if library else [])])
    attributes = list((gate or {}).get("attributes") or [])
    found = [a["check"] for a in attributes if a.get("check")] or [c for c in checks.values() if c]
    check = next((c for c in found if c.get("decision") == outcome.decision), found[0] if found else None)
    reasons = list(outcome.reasons) + [n for n in notes if n not in outcome.reasons]
    return SuiteOutcome(outcome.decision, reasons, check, rows, bool(result.success), list(outcome.rules), attributes,
                        library=gate)


# ---------------------------------------------------------------------------------- store
def save_suite(suite: gx.ExpectationSuite, path: str | Path) -> Path:
    """Write ``suite`` as JSON (GX's own suite format); replaces ``path`` atomically."""
    path = Path(path)
    payload = suite.to_json_dict()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _is_registered(expectation_type: str) -> bool:
    from great_expectations.exceptions import ExpectationNotFoundError
    from great_expectations.expectations.registry import get_expectation_impl

    try:
        get_expectation_impl(expectation_type)
    except ExpectationNotFoundError:
        return False
    return True


def load_suite(path: str | Path) -> gx.ExpectationSuite:
    """Read a suite written by :func:`save_suite`, with every expectation it lists.

    GX drops an expectation whose type is unknown in this process (or whose fields do not
    validate) with only a logged error; this refuses instead.

    Raises
    ------
    InputError
        Unreadable file; an expectation type unknown in this process (named); an invalid
        expectation (e.g. fields that disagree with its policy); or fewer expectations
        loaded than the file lists.
    """
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read expectation suite {path}: {exc}") from exc
    if not isinstance(payload, dict) or not payload.get("name"):
        raise InputError(f"{path} is not an expectation suite (no 'name'); write it with save_suite")
    listed = payload.get("expectations") or []
    types = [e.get("type", "?") if isinstance(e, dict) else "?" for e in listed]
    unknown = sorted({t for t in types if not _is_registered(t)})
    if unknown:
        raise InputError(
            f"expectation suite {path} lists {len(listed)} expectations of which {sum(t in unknown for t in types)} "
            f"have a type unknown in this process: {unknown}. Import the module that defines them "
            "(faux-checks: 'import faux_checks_gx') or rebuild the suite from the policy"
        )
    kwargs = {k: payload.get(k) for k in ("name", "expectations", "suite_parameters", "meta", "notes", "id")}
    try:
        suite = gx.ExpectationSuite(**kwargs)
    except Exception as exc:  # noqa: BLE001 - e.g. a field validator of one of our expectations
        raise InputError(f"expectation suite {path} is invalid: {exc}") from None
    if len(suite.expectations) != len(listed):
        raise InputError(
            f"expectation suite {path} lists {len(listed)} expectations but only {len(suite.expectations)} loaded "
            "(GX logged why); fix the file or rebuild the suite from the policy"
        )
    return suite
