"""The policy's baseline testers, run on the rows the fAux check audits.

One definition of each tester's scores (:func:`baseline_scores`) and of its report entry
(:func:`flagged_summary`), shared by ``run_check`` and the Great Expectations baseline metrics.
A new tester: a module in :mod:`faux_checks.baselines`, a branch in :func:`baseline_scores`, a
field in the policy schema and an expectation in ``expectations/`` (docs/architecture.md).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..baselines.linked_columns import LinkedColumnsTester, check_links, parse_links
from ..errors import InputError
from ..method.faux import LICResult
from ..method.forward import is_forward_only
from ..method.output import TargetOutput, predict_probability
from .policy import Policy, TesterSettings
from .rows import AuditRows, direct_derivative, encoded_level

__all__ = ["FLAGGED_FRACTION_TESTERS", "baseline_scores", "flagged_summary", "run_baselines"]

#: Testers that differentiate the target: not applicable to a forward-only target (ONNX, trees, scikit-learn).
GRADIENT_TESTERS = ("fta", "weighted_fta", "unfair_map")
FLAGGED_FRACTION_TESTERS = ("fta", "weighted_fta", "unfair_map", "fliptest", "ftu_flip", "linked_columns")


def baseline_scores(name: str, settings: TesterSettings, target_model, output: TargetOutput, audit: AuditRows, *,
                    seed: int = 0, links: Mapping[str, Mapping[str, str]] | None = None) -> tuple[np.ndarray | None, str]:
    """Per-individual scores of a baseline tester on the audited rows, and what they measure.

    The one definition shared by :func:`~faux_checks.gate.check.run_check` and the Great Expectations baseline metrics.
    ``links`` are the policy's ``[linked_columns]`` (tester ``linked_columns``).

    Returns
    -------
    scores : ndarray of shape (n,) or None
        None when the tester does not apply to this target (the str then says why).
    description : str
        The flagging rule in words (``"… > threshold"``), or "not applicable: …".
    """
    from ..baselines.fliptest import FlipTestTester
    from ..baselines.fta import FTATester
    from ..baselines.ftu import FTUFlipTester
    from ..baselines.unfair_map import UnfairMapTester
    from ..baselines.weighted_fta import WeightedFTATester

    X, protected, values = audit.X, audit.protected, audit.values
    thr = f"{settings.threshold:g}"
    if name in GRADIENT_TESTERS and is_forward_only(target_model):
        return None, (f"not applicable: {name} needs the target's input gradient; the target is forward-only "
                      f"({target_model.access})")
    if name == "fta":
        return (FTATester(target_model, output=output, p=settings.p).score(X),
                f"‖∇f‖_{settings.p:g} > {thr}")
    if name == "weighted_fta":
        tester = WeightedFTATester(target_model, kind=protected.kind, subspace=settings.subspace, p=settings.p,
                                   output=output).fit(X, values)
        proj = "P_S" if settings.subspace == "sensitive" else "(I − P_S)"
        return tester.score(X), f"‖{proj} ∇f‖_{settings.p:g} > {thr} (sensitive subspace of a linear model of c)"
    if name == "unfair_map":
        tester = UnfairMapTester(target_model, kind=protected.kind, steps=settings.steps, step_size=settings.step_size,
                                 penalty=settings.penalty, output=output).fit(X, values)
        return (tester.score(X), f"Unfair Map loss ratio > {thr} ({settings.steps} steps, η = {settings.step_size:g}, "
                f"λ = {settings.penalty:g})")
    if name == "fliptest":
        if protected.kind == "continuous":
            return None, "not applicable: FlipTest needs protected groups (the protected attribute is continuous)"
        tester = FlipTestTester(target_model, method=settings.method, max_n=settings.max_n, reg=settings.reg,
                                seed=seed, output=output)
        return tester.score(X, values), f"|f(x) − f(T(x))| > {thr} (FlipTest, {settings.method} transport)"
    if name == "ftu_flip":
        spec = audit.feature_spec
        if protected.name not in spec.source_columns:
            return None, "not applicable: the target does not take the protected attribute as input"
        mask, _ = direct_derivative(spec, protected)
        enc = spec.columns[spec.source_columns.index(protected.name)]
        if protected.kind == "continuous" or (int(mask.sum()) == 1 and len(protected.groups) != 2):
            return None, ("not applicable: the protected attribute's input column is not a two-level code or a "
                          "one-hot group")
        levels = (0.0, 1.0)
        if int(mask.sum()) == 1:
            levels = tuple(float(encoded_level(enc, g)[0]) for g in protected.groups)
        tester = FTUFlipTester(target_model, protected_columns=mask, levels=levels, output=output)
        return tester.score(X), f"|f(x) − f(x with the protected input flipped)| > {thr} (FTU flip)"
    if name == "linked_columns":
        return _linked_columns_scores(target_model, output, audit, links or {}, thr)
    raise InputError(f"unknown per-individual tester {name!r}; known: {list(FLAGGED_FRACTION_TESTERS)}")


def _linked_columns_scores(target_model, output: TargetOutput, audit: AuditRows, links, thr: str):
    """The linked-columns tester on the audited rows (the policy's links checked against the data and the spec)."""
    protected, spec = audit.protected, audit.feature_spec
    if protected.kind == "continuous":
        return None, "not applicable: linked columns map values between protected groups (the attribute is continuous)"
    frame = audit.frame
    levels = {enc.name: tuple(enc.levels) + tuple(raw for raw, _ in enc.aliases)      # aliased values are known
              for enc in spec.columns if enc.kind == "categorical"}
    check_links(links, columns=list(frame.columns), groups=protected.groups, levels=levels)
    predict = lambda f: predict_probability(target_model, spec.encode(f), output)   # noqa: E731
    tester = LinkedColumnsTester(predict, protected=protected.name, links=links, groups=protected.groups)
    declared = ", ".join(f"{link.column}: " + " ↔ ".join(
        f"{g}=" + "/".join(dict.fromkeys(v for vals in table.values() for v in vals)) for g, table in link.values.items())
        + (f" (by {link.by})" if link.by else "") for link in parse_links(links))
    both = tester.scores(frame, audit.values)
    many = any(len(vals) > 1 for link in parse_links(links) for table in link.values.values() for vals in table.values())
    note = (f"; mean over each group's tied values, the largest of them flags {np.mean(both['max'] > float(thr)):.2%}"
            if many else "")
    return (both["mean"],
            f"|f(x) − f(x in the other group, linked values mapped)| > {thr} (linked columns {declared}{note})")


def flagged_summary(settings: TesterSettings, scores: np.ndarray | None, description: str) -> dict[str, Any]:
    """The report entry of a per-individual tester: flagged fraction over ``threshold`` against its limit.

    ``scores`` None (tester not applicable): value None, passed True, ``description`` as summary.
    """
    limit = settings.max_flagged_fraction
    entry: dict[str, Any] = {"statistic": "flagged_fraction", "value": None, "threshold": settings.threshold,
                             "limit": limit, "gating": settings.gating, "passed": True, "p50": None, "p90": None,
                             "summary": description}
    if scores is None:
        return entry
    frac = float(np.mean(scores > settings.threshold))
    entry.update(value=frac, passed=limit is None or frac <= limit, p50=float(np.median(scores)),
                 p90=float(np.quantile(scores, 0.9)), summary=f"{frac:.2%} of individuals with {description}",
                 n_flagged=int(np.sum(scores > settings.threshold)), description=description)
    return entry


def run_baselines(policy: Policy, target_model, output: TargetOutput, X: np.ndarray, lic: LICResult,
                  groups: np.ndarray, y_true: np.ndarray | None, *, audit: AuditRows | None = None) -> dict[str, Any]:
    """Every enabled baseline tester of the policy on the audited rows: name -> report entry.

    Per-individual testers (:data:`FLAGGED_FRACTION_TESTERS`) are summarised by
    :func:`flagged_summary`; group metrics (demographic parity, equalized odds) compare the
    predictions P(y | x) > 0.5 across ``groups`` (equalized odds needs ``y_true``).
    """
    from ..baselines.group_metrics import group_metrics

    out: dict[str, Any] = {}
    for name, settings in policy.testers.items():
        if not settings.enabled:
            continue
        if name in FLAGGED_FRACTION_TESTERS:
            if audit is None:
                raise InputError(f"tester {name!r} needs the audit rows (pass audit=)")
            scores, description = baseline_scores(name, settings, target_model, output, audit, seed=policy.seed,
                                                  links=policy.linked_columns)
            out[name] = flagged_summary(settings, scores, description)
        elif name in ("demographic_parity", "equalized_odds"):
            if name == "equalized_odds" and y_true is None:
                out[name] = {"statistic": name, "value": None, "passed": False, "gating": settings.gating,
                             "threshold": settings.threshold, "summary": "not computed: the policy names no label column"}
                continue
            y_pred = (lic.probability > 0.5).astype(int)
            metrics = group_metrics(y_pred, groups, y_true if name == "equalized_odds" else None)
            key = "demographic_parity_difference" if name == "demographic_parity" else "equalized_odds_difference"
            value = metrics[key]
            out[name] = {"statistic": key, "value": value, "threshold": settings.threshold, "limit": settings.threshold,
                         "gating": settings.gating, "passed": value <= settings.threshold,
                         "summary": f"{key} {value:.2%} (limit {settings.threshold:.2%})"}
    return out
