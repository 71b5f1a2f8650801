"""What a check says beside its decision: the columns the swap reading moved or held and why, what a declaration
would change, and the notes that follow the reasons (undefined scores, rows not audited, the direct term, a tree
target read with soft moves).

Each function reads what :func:`faux_checks.gate.one_attribute.check_one_attribute` measured; none decides anything.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError
from ..inputs.missing import MISSINGNESS, feature_columns
from ..inputs.tabular import FeatureSpec
from ..method.faux import FAuxTester
from ..method.result import LICResult
from ..method.held import INDEPENDENCE_ALPHA, INFORMATIVE_Z
from ..method.output import TargetOutput
from .aux_model import AuxFit
from .crossfit import cross_fit_scores
from .decision import missing_protected_note, undefined_note
from .policy_schema import Policy
from .rows import AuditRows
from .scorer import faux_tester, swap_categorical

__all__ = ["SENSITIVITY_COLUMNS", "check_notes", "column_roles", "held_columns", "sensitivity", "sensitivity_note",
           "tree_note"]


def column_roles(tester: FAuxTester, spec: FeatureSpec, policy: Policy) -> list[dict]:
    """Per source column the aux model sees: whether the move may change it, and why (the report's "which columns
    carried the move and why").

    ``role``: ``declared`` (admissible), ``independent`` (distributed alike in every group: chi-square p ≥ 0.01),
    ``uninformative`` (permuting it does not raise the aux model's held-out loss), or ``moves`` (``released``
    says why when the joint test of the held columns released it); with the test figures (``p_value``,
    ``informative_z``) where they were computed.
    """
    if getattr(tester, "reference", None) is None:
        return []
    columns = feature_columns(spec)[~spec.feature_mask(policy.single_protected("the in-memory check"))]
    stats: dict[str, dict] = {}
    for row in getattr(tester, "independence_", []):
        stats.setdefault(str(columns[row["features"][0]]), {})["p_value"] = row["p_value"]
    for row in getattr(tester, "informativeness_", []):
        stats.setdefault(str(columns[row["features"][0]]), {})["informative_z"] = row["z"]
    released = {str(columns[g[0]]) for g in (getattr(tester, "joint_hold_", None) or {}).get("released", [])}
    out = []
    for name in dict.fromkeys(map(str, columns)):
        st = stats.get(name, {})
        if name in policy.faux.admissible or name in {MISSINGNESS.format(c) for c in policy.faux.admissible}:
            role = "declared"
        elif name in released:
            role = "moves"
            st = {**st, "released": "carries the protected attribute jointly with other held columns"}
        elif st.get("p_value") is not None and st["p_value"] >= INDEPENDENCE_ALPHA:
            role = "independent"
        elif st.get("informative_z") is not None and not st["informative_z"] > INFORMATIVE_Z:
            role = "uninformative"
        else:
            role = "moves"
        out.append({"column": name, "role": role, **st})
    return out


#: Source columns the sensitivity report re-scores (the ones carrying the most evidence over flagged rows).
SENSITIVITY_COLUMNS = 3


def sensitivity(target_model, aux: AuxFit, audit: AuditRows, policy: Policy, output: TargetOutput, lic: LICResult,
                 evidence: pd.DataFrame, held: list[str], decision: str, mask: np.ndarray) -> list[dict]:
    """What a declaration would change, for a policy that declares no admissible column and did not pass.

    The swap reading with no declaration counts the use of every feature that varies with c. For the
    ``SENSITIVITY_COLUMNS`` source columns carrying the most evidence over the flagged individuals, the flagged
    fraction is recomputed with that column declared admissible (same auxiliary model, the reference refitted).
    Our reading: it names the columns on whose declaration the decision depends; declaring
    one is a value judgement the policy's owner makes, not something the data can settle.

    Returns
    -------
    list of dict
        ``column``, ``flagged_fraction`` (undefined counted as flagged) and ``mean_abs_evidence`` per column;
        empty when the policy declares admissible columns, the variant is not swap, or the check passed.
    """
    faux = policy.faux
    if faux.variant != "swap" or faux.admissible or decision == "passed" or lic.evidence is None:
        return []
    flagged = lic.flagged(faux.delta)
    rows = evidence[flagged] if flagged.any() else evidence
    names = set(feature_columns(audit.feature_spec))           # a column is held whole when its missingness is too
    whole = {c for c in held if MISSINGNESS.format(c) not in names or MISSINGNESS.format(c) in held}
    ranked = [c for c in rows.abs().mean().sort_values(ascending=False).index
              if c != policy.protected and c not in whole][:SENSITIVITY_COLUMNS]
    out = []
    for column in ranked:
        declared = policy.model_copy(update={"faux": faux.model_copy(update={"admissible": (str(column),)})})
        try:
            if aux.cross is not None:
                again, _ = cross_fit_scores(target_model, aux.cross, audit, declared, output, mask, evidence=False)
            else:
                tester = faux_tester(target_model, aux.model, declared, output, audit.feature_spec, audit.protected,
                                     reference_rows=audit.X[aux.rows], reference_values=audit.values[aux.rows],
                                     holdout_rows=audit.X[aux.holdout], holdout_values=audit.values[aux.holdout])
                again = tester.evaluate(audit.X, audit.values, evidence=False)
        except InputError:
            continue
        out.append({"column": str(column), "flagged_fraction": float(np.mean(again.decision_weights(faux.delta))),
                    "mean_abs_evidence": float(rows[column].abs().mean())})
    return out


def sensitivity_note(sensitivity: list[dict], policy: Policy) -> list[str]:
    if not sensitivity:
        return []
    parts = "; ".join(f"'{s['column']}' admissible: {s['flagged_fraction']:.1%} flagged" for s in sensitivity)
    return [f"no column is declared admissible, so the score counts the use of every feature that varies with "
            f"'{policy.protected}'. The columns carrying most of the move, each declared on its own: {parts} "
            f"(limit {policy.faux.max_flagged_fraction:.1%}). Whether a column may differ between groups is a value "
            "judgement for the policy's owner ([faux] admissible; docs/method.md, 'Admissible features')"]


def held_columns(tester: FAuxTester, spec: FeatureSpec, protected: str) -> list[str]:
    """Source columns the swap reading held fixed beyond the declared ones: uninformative about c, or independent of it."""
    held = getattr(tester, "held_fixed_", None)
    if held is None or not held.any():
        return []
    columns = feature_columns(spec)[~spec.feature_mask(protected)]
    order = list(dict.fromkeys(feature_columns(spec)))
    return sorted(set(columns[held]), key=order.index)


def check_notes(policy: Policy, audit: AuditRows, lic: LICResult, n_undefined: int, uses_direct: bool,
           held: list[str], nothing_free: bool = False) -> list[str]:
    """What follows the decision's reasons: undefined scores, rows not audited, the direct term, columns held fixed."""
    notes = []
    if policy.faux.variant == "swap":
        fixed = [f"{', '.join(policy.faux.admissible)} (admissible)"] if policy.faux.admissible else []
        extra = [c for c in held if c not in policy.faux.admissible]
        if extra:
            fixed.append(f"{', '.join(extra)} (uninformative about '{policy.protected}' on the auxiliary model's "
                         "held-out rows, or distributed alike in every group)")
        how = ("each to the value of the person's own rank in the other group among people with the same held "
               "columns, categorical levels switched with their probabilities" if policy.faux.swap_metric == "matched"
               else "as the auxiliary model says they go with it")
        what = f"predicted value ({policy.faux.unit})" if policy.target_output == "value" else "predicted probability"
        notes.append(f"LIC score = the estimated change of the {what} if only '{policy.protected}' "
                     f"changed, the other features moving with it ({how})"
                     + (f"; held fixed: {'; '.join(fixed)}" if fixed else ""))
        if nothing_free:
            notes.append(f"nothing outside the declared columns carries '{policy.protected}': every other column is "
                         "uninformative about it or independent of it, so the counterfactual moves no feature and every "
                         "score is 0 by definition")
    if lic.no_split_crossed is not None and lic.no_split_crossed.any():
        notes.append(f"{fmt_count(int(lic.no_split_crossed.sum()))} of {fmt_count(len(lic.scores))} scores are 0 only "
                     f"because the forward-only target's prediction did not change within ± the finite-difference "
                     f"step (a tree crossed no split), not by evidence")
    if n_undefined:
        notes.append(undefined_note(n_undefined))
    if audit.protected.n_missing:
        notes.append(missing_protected_note(audit.protected.n_missing))
    if uses_direct:
        effect = ("the counterfactual sets it to the other group too" if policy.faux.variant == "swap"
                  else "its direct effect is added to the LIC score")
        notes.append(
            f"the target model takes the protected attribute '{policy.protected}' as an input: {effect} (largest "
            f"change from that column alone {np.nanmax(lic.direct) if lic.direct is not None and len(lic.direct) else float('nan'):.3g})"
        )
    return notes


def tree_note(target_model, policy: Policy, spec: FeatureSpec) -> list[str]:
    """A tree target read with soft one-hot moves: its splits read a fractional level as 0 or 1 (docs/method.md)."""
    if not (getattr(target_model, "piecewise_constant", False) and policy.faux.variant == "swap"
            and swap_categorical(policy.faux, target_model) == "soft" and any(c.kind == "categorical" for c in spec.columns)):
        return []
    return ["the target is a tree model read with swap_categorical = 'soft': its splits read the moved, fractional "
            "one-hot values by threshold. On Adult this flagged 5.4% (XGBoost) and 27.7% (LightGBM) against 12.2% and "
            "11.9% definitionally affected; swap_categorical = 'snap' in [faux] flagged 12.2% and 11.9% "
            "(docs/method.md, 'Forward-only targets')"]
