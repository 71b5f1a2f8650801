"""The gate's adapter for version-to-version regression: the candidate against earlier versions, per individual.

Two comparisons per gated version, both on the audit rows both versions scored:

- ``deployed``: the version holding the alias, the baseline of the "no new harm" rule
  (``[decision] max_newly_flagged_fraction``); with the rule set, a deployed version gated on other audit data
  or under another policy cannot be compared and the rule is ``not judged`` (the gate fails closed: undecided);
- ``previous``: the highest earlier version with a decision (the history's churn between consecutive versions;
  reported, never gated).

The maths are :mod:`faux_checks.gate.regression`; this module only finds the earlier versions' score records in
the registry (their ``records/scores.parquet``) and checks they were written on the same data under the same
policy (tags ``fairness_data_sha256``, ``fairness_policy_sha256``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

__all__ = ["against_earlier"]

#: Decisions whose score records are a version's verdict (an undecided check may have none, or a partial one).
_DECIDED = ("passed", "failed")


def against_earlier(model_name: str, version: str, outcome, frame, *, tracking_uri: str | None, alias: str,
                    workdir: str, policy_path: str | None, records_dir: str, data_sha256: str | None):
    """``outcome`` with ``regression`` (the two comparisons) and, with a limit, the no-new-harm rule folded in.

    Parameters
    ----------
    outcome : faux_checks_gx.suite.SuiteOutcome
        The candidate's validated suite (its records already in ``records_dir``).
    frame : DataFrame
        The audit data (the protected column gives the per-group churn).
    data_sha256 : str or None
        The audit data's hash as the version tags record it (:func:`faux_checks.provenance.data_sha256`).

    Returns
    -------
    SuiteOutcome
        Unchanged but for ``regression`` when no limit is set; with ``max_newly_flagged_fraction`` the rule row
        is added (:func:`faux_checks.gate.decision.add_rule`). A registry error while comparing leaves the rule
        ``not judged`` (never a silent pass) and the churn unreported, with the cause.
    """
    import pandas as pd

    from faux_checks.gate.decision import add_rule, rule_row
    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.regression import version_comparison
    from faux_checks.registry import GATE_TAG, Registry

    scores_path = Path(records_dir) / "scores.parquet"
    if outcome.check is None:                                # the check did not run: nothing to compare
        return outcome
    policy = load_policy(policy_path)
    limit = policy.decision.max_newly_flagged_fraction
    if not scores_path.is_file():                            # several attributes: per-attribute records
        if limit is None:
            return outcome
        rule = rule_row("max_newly_flagged_fraction", "not judged", "no new harm not judged: the per-individual "
                        "comparison is not computed for several protected attributes yet; unset "
                        "decision.max_newly_flagged_fraction, or gate with one policy per attribute", None, limit)
        decided = add_rule(outcome.decision, outcome.reasons, outcome.rules, rule)
        return replace(outcome, decision=decided.decision, reasons=decided.reasons, rules=decided.rules,
                       regression=[{"role": "deployed", "compared_with": None, "change": None,
                                    "note": rule["detail"], "rule": rule}])
    policy_sha = ((outcome.check.get("provenance") or {}).get("policy_sha256")) or policy.sha256()
    try:
        candidate = pd.read_parquet(scores_path)
        groups = frame[policy.protected].to_numpy() if policy.protected in frame.columns else None
        registry = Registry(tracking_uri)
        rows = {str(r["version"]): r for r in registry.history(model_name)}
        deployed = registry.alias_version(model_name, alias)
        deployed = None if deployed == str(version) else deployed
        previous = max((v for v, r in rows.items() if r.get(GATE_TAG) in _DECIDED and int(v) < int(version)),
                       key=int, default=None)
        comparisons = []
        for role, other in (("deployed", deployed), ("previous", previous)):
            if role == "previous" and other is not None and other == deployed:
                comparisons.append({**comparisons[0], "role": "previous", "rule": None})
                continue
            base, why = (None, None) if other is None else _scores_of(registry, rows.get(other) or {}, other,
                                                                        data_sha256, policy_sha, workdir)
            comparisons.append(version_comparison(
                candidate, base, baseline_version=other, why_not=why, groups=groups,
                limit=limit if role == "deployed" else None, confidence=policy.decision.confidence, role=role))
    except Exception as exc:  # noqa: BLE001 - the registry or a record failed us: the rule cannot be judged, the churn is unknown
        note = f"the comparison with earlier versions failed ({type(exc).__name__}: {exc})"
        rule = None if limit is None else rule_row("max_newly_flagged_fraction", "not judged",
                                                   f"no new harm not judged: {note}", None, limit)
        comparisons = [{"role": "deployed", "compared_with": None, "change": None, "note": note, "rule": rule}]
    rule = comparisons[0].get("rule")
    if rule is not None:
        decided = add_rule(outcome.decision, outcome.reasons, outcome.rules, rule)
        outcome = replace(outcome, decision=decided.decision, reasons=decided.reasons, rules=decided.rules)
    return replace(outcome, regression=comparisons)


def _scores_of(registry, tags: dict, version: str, data_sha256: str | None, policy_sha256: str | None,
               workdir: str):
    """``(scores frame, None)`` of an earlier version, or ``(None, why not)`` with the fix."""
    import pandas as pd

    from faux_checks.registry.records import GateProvenance, GateRecord

    fix = (f"re-gate v{version} on this data under this policy first (`faux-checks gate <model> --data ... "
           f"--version {version} --force`) to compare them per individual")
    gate = GateRecord.from_tags(tags)
    provenance = gate.provenance or GateProvenance()
    recorded = provenance.data_sha256
    if not recorded or recorded != data_sha256:
        return None, (f"v{version} was gated on other audit data (sha256 {str(recorded)[:12]}…, this run "
                      f"{str(data_sha256)[:12]}…), so its individuals are not these; {fix}")
    if provenance.policy_sha256 != policy_sha256:
        return None, (f"v{version} was gated under another policy (sha256 {str(provenance.policy_sha256)[:12]}…"
                      f", this run {str(policy_sha256)[:12]}…): δ or the reading may differ, so a changed flag need not "
                      f"be the model's; {fix}")
    run_id = gate.run_id
    if not run_id:
        return None, f"v{version} has no gate run recorded; {fix}"
    try:
        folder = registry.download_run_artifacts(run_id, "records/scores.parquet",
                                                 Path(workdir) / f"earlier-v{version}-{run_id[:8]}")
        path = folder if Path(folder).is_file() else Path(folder) / "scores.parquet"
        return pd.read_parquet(path), None
    except Exception as exc:  # noqa: BLE001 - the record's trouble is the reason it is not compared
        return None, f"v{version}'s scores record could not be read ({type(exc).__name__}: {exc}); {fix}"
