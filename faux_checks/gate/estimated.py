"""The gate when the protected attribute is only estimated: per-row group probabilities, multiple imputation.

Policy ``[protected_probabilities]`` names one probability column per group (an estimate such as BISG); the audit
data holds no c. The check is a multiple imputation (Rubin 1987, *Multiple Imputation for Nonresponse in Surveys*):

1. M = ``draws`` completed data sets, c drawn per row from its probabilities
   (:func:`~faux_checks.inputs.probabilities.draw_groups`, seeds from the policy seed, recorded);
2. each is checked as if c were known (:func:`~faux_checks.gate.attributes.check_attributes`, its own auxiliary
   model; the probability columns are dropped first and c is the protected column, so neither enters the target
   model's inputs nor the scores file);
3. the per-draw flagged fractions q_m and their intervals [l_m, h_m] are combined by Rubin's rules
   (:func:`rubin_interval`): point Q̄ = mean q_m; within variance W from each draw's own interval (its half-width
   over z, on each side, so an asymmetric Clopper–Pearson interval widened by the aux-seed spread keeps its shape);
   between variance B = sample variance of q_m; total T = W + (1 + 1/M)·B; the interval Q̄ ± t_ν·√T with the
   Barnard–Rubin (1999) degrees of freedom ν (complete-data ν = n − 1). With B = 0 it is each draw's own interval.

Why this is sound: when the probabilities are calibrated given everything c depends on, each completed data set
has the joint law of (x, c) of the truth, so the flagged fraction is read without bias and Rubin's interval covers
it. When they are blunt (calibrated only marginally), the drawn c is an attenuated copy of the true c: the auxiliary
model sees a weaker group contrast and the flagged fraction is *under-read*. A fail therefore stays safe, a pass does
not. The decision is asymmetric (:func:`flagged_rule`, :func:`sharpness_rule`): failed when the combined lower end
is over the policy threshold, at any sharpness; passed only when the upper end is within it **and** the
probabilities' expected ROC-AUC (:func:`~faux_checks.inputs.probabilities.expected_auc`) reaches ``min_sharpness``
**and** the upper end of the flagged fraction read at δ·λ is within it (:func:`pass_interval`), λ the probabilities'
discrimination (:func:`~faux_checks.inputs.probabilities.discrimination`, Tjur's E[p | c = 1] − E[p | c = 0]):
probabilities calibrated on a signal of c but blind to the features shrink the group contrast the auxiliary model
sees by λ, and a person's change with it, so one who truly moves by δ shows about δ·λ (the worst case);
undecided otherwise, saying the sharpness they have and the sharpness needed. Every other rule of the check
(auxiliary-model quality, group rows, testers) is read over the draws (:func:`draw_rules`): it holds only where it
holds in every draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import ConfigurationError
from ..inputs.probabilities import (check_probabilities_not_input, discrimination, draw_groups, expected_auc,
                                    probability_matrix)
from .attributes import AttributeSection, AttributesResult, check_attributes
from .bounds import FlaggedInterval, clopper_pearson
from .decision import decide, rule_row
from .policy_schema import Policy
from .result import CheckResult

__all__ = ["ImputedInterval", "check_estimated", "draw_rules", "draw_seeds", "estimated_outcome", "flagged_rule",
           "imputed_frame", "pass_interval", "pass_reading", "preflight_rows", "rubin_interval", "sharpness_rule"]

#: Statuses from worst to best when a rule is read over the draws (a rule exceeded in every draw stays exceeded).
_ORDER = ("not computed", "not met", "not judged", "inconclusive", "exceeded", "ok")


@dataclass(frozen=True)
class ImputedInterval(FlaggedInterval):
    """The flagged fraction's interval combined over M completed data sets by Rubin's rules (module docstring).

    Attributes (besides :class:`~faux_checks.gate.bounds.FlaggedInterval`'s; ``individuals`` holds the combined
    ends, ``seed_shift`` is (0, 0))
    ----------
    draws : tuple of float
        q_m, each draw's flagged fraction (M,).
    within : (float, float)
        W on the lower and the upper side (fraction², mean over draws of ((q_m − l_m)/z)² and ((h_m − q_m)/z)²).
    between : float
        B, the sample variance of q_m (fraction²).
    df : (float, float)
        Barnard–Rubin degrees of freedom of each side (inf when B = 0 and n is unbounded).
    """

    draws: tuple = field(default=())
    within: tuple[float, float] = (0.0, 0.0)
    between: float = 0.0
    df: tuple[float, float] = (math.inf, math.inf)

    def to_dict(self) -> dict:
        """JSON-ready: the combined interval, each draw's fraction and the variance parts."""
        return {**super().to_dict(), "method": "Rubin's rules over multiple imputations of the protected attribute "
                "(within variance from each draw's interval, t reference with Barnard-Rubin degrees of freedom)",
                "draws": list(self.draws), "within": list(self.within), "between": self.between,
                "total": [w + (1 + 1 / max(len(self.draws), 1)) * self.between for w in self.within],
                "df": [d if math.isfinite(d) else None for d in self.df]}


def _barnard_rubin(within: float, between: float, m: int, n_complete: float) -> float:
    """Barnard & Rubin (1999) degrees of freedom of one combined estimate (Biometrika 86:948-955, eq. 3)."""
    extra = (1.0 + 1.0 / m) * between
    total = within + extra
    observed = (n_complete + 1.0) / (n_complete + 3.0) * n_complete * (1.0 - extra / total) if total > 0 else math.inf
    if extra <= 0:
        return observed
    old = (m - 1) * (1.0 + within / extra) ** 2
    return 1.0 / (1.0 / old + 1.0 / observed) if math.isfinite(observed) else old


def rubin_interval(fractions: Sequence[float], lowers: Sequence[float], uppers: Sequence[float], *, n: int,
                   confidence: float) -> ImputedInterval:
    """Combine M per-draw flagged fractions and intervals by Rubin's rules (module docstring).

    Parameters
    ----------
    fractions, lowers, uppers : sequence of float, length M ≥ 2
        q_m and each draw's interval [l_m, h_m], fractions in [0, 1].
    n : int
        Audited rows per draw (complete-data degrees of freedom n − 1).
    confidence : float
        Of each draw's interval and of the result, in (0, 1).

    Returns
    -------
    ImputedInterval
        Point Q̄; ends Q̄ − t_{ν_lo}·√T_lo and Q̄ + t_{ν_hi}·√T_hi, clipped to [0, 1].

    Raises
    ------
    ValueError
        Fewer than two draws, or lengths that differ.

    Notes
    -----
    Rubin (1987), eqs. 3.1.2-3.1.5; t reference with Barnard & Rubin (1999) degrees of freedom.
    """
    from scipy.stats import norm, t

    q, lo, hi = (np.asarray(v, dtype=np.float64) for v in (fractions, lowers, uppers))
    m = len(q)
    if m < 2 or len(lo) != m or len(hi) != m:
        raise ValueError(f"Rubin's rules need at least two draws with one interval each; got {m} fractions, "
                         f"{len(lo)} lower and {len(hi)} upper ends")
    z = float(norm.ppf(0.5 + confidence / 2.0))
    point, between = float(q.mean()), float(q.var(ddof=1))
    within = (float(np.mean(((q - lo) / z) ** 2)), float(np.mean(((hi - q) / z) ** 2)))
    df = tuple(_barnard_rubin(w, between, m, max(n - 1, 1)) for w in within)
    ends = [point + sign * float(t.ppf(0.5 + confidence / 2.0, d) if math.isfinite(d) else z)
            * math.sqrt(w + (1.0 + 1.0 / m) * between) for sign, w, d in zip((-1.0, 1.0), within, df, strict=True)]
    k = int(round(point * n))
    return ImputedInterval(point, k, int(n), float(confidence), (max(0.0, ends[0]), min(1.0, ends[1])),
                           draws=tuple(float(v) for v in q), within=within, between=between, df=(df[0], df[1]))


def pass_reading(check: CheckResult, delta: float, confidence: float) -> FlaggedInterval | None:
    """One draw's flagged fraction and interval at a smaller δ, from its per-row scores (undefined counted flagged).

    Parameters
    ----------
    check : CheckResult
        A draw's check, with ``scores`` (n_input_rows,) and ``row_index`` (n_individuals,).
    delta : float
        The δ read at (units of the target model's output), at most the policy's δ.
    confidence : float
        Of the Clopper–Pearson interval, in (0, 1).

    Returns
    -------
    FlaggedInterval or None
        k of n audited rows with a score over ``delta`` or undefined, the Clopper–Pearson interval widened by the
        draw's own aux-seed shift (read at the policy's δ); None without per-row scores.
    """
    if check.scores is None or check.row_index is None or check.interval is None or len(check.row_index) == 0:
        return None
    s = np.asarray(check.scores, dtype=np.float64)[np.asarray(check.row_index)]
    k, n = int(np.sum(~np.isfinite(s) | (s > delta))), len(s)
    return FlaggedInterval(k / n, k, n, float(confidence), clopper_pearson(k, n, confidence),
                           check.interval.seed_shift, None)


def pass_interval(checks: Sequence[CheckResult], delta: float, confidence: float) -> ImputedInterval | None:
    """The flagged fraction at ``delta`` combined over the draws by Rubin's rules (:func:`pass_reading` per draw;
    None when a draw has no per-row scores)."""
    given = [pass_reading(c, delta, confidence) for c in checks]
    readings = [r for r in given if r is not None]
    if len(readings) < len(given) or len(readings) < 2:
        return None
    return rubin_interval([r.fraction for r in readings], [r.lower for r in readings],
                          [r.upper for r in readings], n=readings[0].n, confidence=confidence)


def flagged_rule(interval: ImputedInterval | None, policy: Policy, *, pass_at: ImputedInterval | None,
                 discrimination: float) -> dict:
    """The combined ``max_flagged_fraction`` rule, read asymmetrically.

    Exceeded when the lower end at the policy's δ is over the policy threshold (or, with ``[decision] rule =
    "upper_bound"``, its upper end); ok only when the upper end of ``pass_at`` (the flagged fraction read at δ·λ,
    :func:`pass_interval`) is within it; inconclusive otherwise; not computed when a draw produced no interval.

    Parameters
    ----------
    interval : ImputedInterval or None
        At the policy's δ.
    pass_at : ImputedInterval or None
        At δ·λ; None (no per-row scores) leaves a pass out of reach.
    discrimination : float
        λ, :func:`~faux_checks.inputs.probabilities.discrimination` of the probabilities. Feature-blind calibrated
        probabilities shrink the group contrast the auxiliary model sees by λ, and a person's change with it.
    """
    limit, delta = policy.faux.max_flagged_fraction, policy.faux.delta
    if interval is None:
        return rule_row("max_flagged_fraction", "not computed", "the flagged fraction was not computed in every "
                        "draw of the protected attribute, so the draws cannot be combined", None, limit)
    lo, hi = interval.lower, interval.upper
    pass_hi = pass_at.upper if pass_at is not None else math.nan
    if lo > limit or (policy.decision.rule == "upper_bound" and hi > limit):
        status, verdict = "exceeded", (f"> max_flagged_fraction {limit:.2%}" + (": even the lower end exceeds it"
                                       if lo > limit else ": its upper end exceeds it (rule upper_bound)"))
    elif pass_hi <= limit:
        status, verdict = "ok", f"<= max_flagged_fraction {limit:.2%}: the upper end read at δ·λ is within the limit"
    elif hi <= limit:
        status, verdict = "inconclusive", (f"within max_flagged_fraction {limit:.2%} at δ but not at δ·λ: "
                                           "probabilities calibrated given the features, or sharper ones, are needed")
    else:
        status, verdict = "inconclusive", (f"straddles max_flagged_fraction {limit:.2%}: more audit rows or more "
                                           "draws would narrow it")
    read = "not computed (no per-row scores)" if pass_at is None else pass_at.text()
    detail = (f"flagged fraction {interval.text()} at δ = {delta:g} {verdict} (combined over {len(interval.draws)} "
              f"draws of c by Rubin's rules; per draw {', '.join(f'{q:.2%}' for q in interval.draws)}; between-draw "
              f"variance {interval.between:.3g}); pass read at δ·λ = {delta * discrimination:.3g}: {read} (λ = "
              f"{discrimination:.3f} the probabilities' discrimination: worst case, probabilities blind to the "
              "features)")
    row = rule_row("max_flagged_fraction", status, detail, interval.fraction, limit)
    return {**row, "bound": [lo, hi], "pass_delta": delta * discrimination,
            "pass_fraction": None if pass_at is None else pass_at.fraction,
            "pass_bound": None if pass_at is None else [pass_at.lower, pass_at.upper]}


def sharpness_rule(sharpness: float, policy: Policy, between: float | None = None) -> dict:
    """The ``protected_probabilities`` rule: ok when the expected ROC-AUC reaches ``min_sharpness``, else not met
    (a pass needs it; a fail does not). Its detail states the form of c and what it does to the interval
    (``between``: the between-draw variance of the flagged fraction, fraction², when computed)."""
    settings = policy.protected_probabilities
    if settings is None:
        raise ConfigurationError("no [protected_probabilities] in the policy: the estimated route needs it")
    need, m = settings.min_sharpness, settings.draws
    form = (f"protected attribute '{settings.column}': estimated probabilities ({m} draws), expected ROC-AUC "
            f"{sharpness:.3f}; the interval carries the imputation spread (between-draw variance "
            f"{'not computed' if between is None else format(between, '.3g')})")
    if math.isfinite(sharpness) and sharpness >= need:
        return rule_row("protected_probabilities", "ok", f"{form}; sharp enough to pass (min_sharpness {need:.2f})",
                        sharpness, need)
    return rule_row("protected_probabilities", "not met",
                    f"{form}; under min_sharpness {need:.2f}: blunt probabilities under-read the flagged fraction, so "
                    f"they can fail a model but not pass it; probabilities with expected ROC-AUC >= {need:.2f} are "
                    "needed (more rows do not make up for it)", sharpness, need)


def draw_rules(checks: Sequence[CheckResult]) -> list[dict]:
    """Every rule of the per-draw checks but ``max_flagged_fraction``, read over the draws.

    The same status in every draw keeps it (draw 1's detail, "in every draw"); ``ok`` in some and ``exceeded`` in
    others is ``inconclusive``; otherwise the worst status that is not ``exceeded`` or ``ok`` (a rule that could not
    be decided in one draw leaves the combination undecided), with the detail of the draw that had it.
    """
    names: list[str] = []
    for check in checks:
        names += [r["rule"] for r in check.rules if r["rule"] not in names and r["rule"] != "max_flagged_fraction"]
    out = []
    for name in names:
        rows = [next((r for r in c.rules if r["rule"] == name), None) for c in checks]
        statuses = [r["status"] if r is not None else "not computed" for r in rows]
        m = len(checks)
        if len(set(statuses)) == 1 and rows[0] is not None:
            out.append({**rows[0], "detail": f"{rows[0]['detail']} (in every one of {m} draws of c)"})
            continue
        worst = min((s for s in statuses if s not in ("ok", "exceeded")), key=_ORDER.index, default="inconclusive")
        at = statuses.index(worst) if worst in statuses else statuses.index("exceeded")
        row = rows[at] or {"rule": name, "observed": None, "limit": None, "detail": "not computed"}
        counts = ", ".join(f"{s} in {statuses.count(s)}" for s in dict.fromkeys(statuses))
        out.append({**row, "status": worst, "detail": f"{row['detail']} (draw {at + 1}; over {m} draws of c: "
                    f"{counts}; a rule holds only where it holds in every draw)"})
    return out


def _mean_over_draws(arrays: Sequence[np.ndarray | None]) -> np.ndarray | None:
    """The per-row mean over draws, NaN where no draw has a value (None when no draw has the array)."""
    given = [np.asarray(a, dtype=np.float64) for a in arrays if a is not None]
    if not given:
        return None
    stack = np.vstack(given)
    counts = np.isfinite(stack).sum(axis=0)
    sums = np.nansum(stack, axis=0)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _flag_probability(check: CheckResult) -> np.ndarray | None:
    """A draw's per-row flag probability: its own, or 0/1 from its scores at δ (NaN where not scored)."""
    if check.flag_probability is not None or check.scores is None:
        return check.flag_probability
    s = np.asarray(check.scores, dtype=np.float64)
    return np.where(np.isfinite(s), (s > check.delta).astype(np.float64), np.nan)


def draw_seeds(policy: Policy) -> list[int]:
    """The M seeds of the draws of c, from the policy seed (``numpy.random.SeedSequence([seed, 1987])``; recorded)."""
    settings = policy.protected_probabilities
    m = settings.draws if settings is not None else 0
    return [int(s) for s in np.random.SeedSequence([policy.seed, 1987]).generate_state(m)]


def imputed_frame(data: pd.DataFrame, policy: Policy, *, feature_spec=None,
                  data_name: str = "the audit data") -> tuple[pd.DataFrame, np.ndarray]:
    """The audit rows without the probability columns, and the checked probabilities.

    Parameters
    ----------
    data : DataFrame of shape (n, any)
        With the ``[protected_probabilities]`` columns and no protected column.
    policy : Policy
        With ``[protected_probabilities]``.
    feature_spec : FeatureSpec, optional
        Refused when it feeds a probability column to the target model.

    Returns
    -------
    (DataFrame of shape (n, any − n_groups), ndarray of shape (n, n_groups))

    Raises
    ------
    ConfigurationError
        :func:`~faux_checks.inputs.probabilities.probability_matrix` and
        :func:`~faux_checks.inputs.probabilities.check_probabilities_not_input`.
    """
    settings = policy.protected_probabilities
    if settings is None:
        raise ConfigurationError("no [protected_probabilities] in the policy: name the group probability columns, "
                                 "e.g. [protected_probabilities] column = \"race\", groups = { a = \"p_a\", b = \"p_b\" }")
    check_probabilities_not_input(feature_spec, list(settings.groups.values()))
    matrix = probability_matrix(data, settings.groups, column=settings.column, data_name=data_name)
    return data.drop(columns=list(settings.groups.values())), matrix


def preflight_rows(data: pd.DataFrame, policy: Policy, *, feature_spec=None,
                   data_name: str = "the audit data") -> tuple[pd.DataFrame, np.ndarray]:
    """The rows a preflight judges (the policy's columns, the model's inputs): :func:`imputed_frame`'s rows with c's
    first draw (:func:`draw_seeds`) in place of the probability columns, and the checked probabilities.

    Parameters
    ----------
    data, policy, feature_spec, data_name
        As :func:`imputed_frame`.

    Returns
    -------
    (DataFrame of shape (n, any − n_groups + 1), ndarray of shape (n, n_groups))

    Raises
    ------
    ConfigurationError
        :func:`imputed_frame`'s errors.
    """
    settings = policy.protected_probabilities
    base, matrix = imputed_frame(data, policy, feature_spec=feature_spec, data_name=data_name)
    assert settings is not None
    return base.assign(**{settings.column: draw_groups(matrix, list(settings.groups), draw_seeds(policy)[0])}), matrix


def _provenance(interval: ImputedInterval | None, sharpness: float, seeds: Sequence[int], policy: Policy) -> dict:
    settings = policy.protected_probabilities
    assert settings is not None
    return {"form": "estimated probabilities", "column": settings.column, "groups": dict(settings.groups),
            "draws": settings.draws, "seeds": list(seeds), "expected_auc": sharpness,
            "min_sharpness": settings.min_sharpness,
            "between_variance": interval.between if interval is not None else None,
            "per_draw_fractions": list(interval.draws) if interval is not None else None,
            "per_draw_tables": "group tables, top flagged rows and the auxiliary model are the first draw's"}


def estimated_outcome(checks: Sequence[CheckResult], sharpness: float, seeds: Sequence[int],
                      policy: Policy, *, discrimination: float) -> AttributesResult:
    """One decision from the per-draw checks (module docstring): the sharpness rule, the combined flagged-fraction
    rule, every other rule over the draws; one section whose check is draw 1's with the combined reading.

    Parameters
    ----------
    checks : sequence of CheckResult, length M
        :func:`~faux_checks.gate.attributes.check_attributes`'s one section per completed data set.
    sharpness : float
        :func:`~faux_checks.inputs.probabilities.expected_auc` of the probabilities.
    discrimination : float
        λ, :func:`~faux_checks.inputs.probabilities.discrimination` of the probabilities (a pass reads at δ·λ).
    seeds : sequence of int
        The draws' seeds (recorded).
    policy : Policy
        With ``[protected_probabilities]``.
    """
    intervals = [c.interval for c in checks if c.interval is not None and math.isfinite(c.interval.fraction)]
    interval = None
    if len(intervals) == len(checks):
        interval = rubin_interval([iv.fraction for iv in intervals], [iv.lower for iv in intervals],
                                  [iv.upper for iv in intervals], n=checks[0].n_individuals,
                                  confidence=policy.decision.confidence)
    between = interval.between if interval is not None else None
    delta_pass = policy.faux.delta * discrimination if math.isfinite(discrimination) else 0.0
    pass_at = pass_interval(checks, delta_pass, policy.decision.confidence)
    rules = [sharpness_rule(sharpness, policy, between),
             flagged_rule(interval, policy, pass_at=pass_at, discrimination=discrimination)] + draw_rules(checks)
    outcome = decide(rules)
    first = checks[0]
    provenance = {**first.provenance, "protected_probabilities": _provenance(interval, sharpness, seeds, policy)}
    combined = replace(first, decision=outcome.decision, reasons=list(outcome.reasons), rules=list(outcome.rules),
                       interval=interval, provenance=provenance, decomposition=None,
                       flagged_fraction=interval.fraction if interval is not None else float("nan"),
                       n_flagged=int(round(float(np.mean([c.n_flagged for c in checks])))),
                       scores=_mean_over_draws([c.scores for c in checks]),
                       flag_probability=_mean_over_draws([_flag_probability(c) for c in checks]))
    section = AttributeSection(policy.attribute_names[0], (), combined, [])
    return AttributesResult(outcome.decision, list(outcome.reasons), list(outcome.rules), [section])


def check_estimated(target_model, data: pd.DataFrame, *, policy: Policy, feature_spec=None,
                    aux_models: Mapping[str, Any] | None = None, progress: bool = False,
                    model_info: dict | None = None) -> AttributesResult:
    """The fAux check with c given as per-row probabilities, by multiple imputation (module docstring).

    Parameters
    ----------
    target_model, feature_spec, progress, model_info
        As for :func:`~faux_checks.gate.attributes.check_attributes`.
    data : DataFrame of shape (n, any)
        Audit rows with the ``[protected_probabilities]`` columns and no protected column.
    policy : Policy
        With ``[protected_probabilities]`` (``protected`` is its ``column``).
    aux_models : mapping, optional
        Refused: each draw trains its own auxiliary model on its own c.

    Returns
    -------
    AttributesResult
        One section (the attribute), decided by :func:`estimated_outcome`; its ``scores`` and ``flag_probability``
        are per-row means over the draws.

    Raises
    ------
    ConfigurationError
        :func:`imputed_frame`'s errors, or a given auxiliary model; before anything is scored.
    """
    if aux_models:
        raise ConfigurationError("a given auxiliary model cannot be used with [protected_probabilities]: each draw "
                                 "of c trains its own; drop --aux-model / aux_models")
    settings = policy.protected_probabilities
    assert settings is not None
    base, matrix = imputed_frame(data, policy, feature_spec=feature_spec)
    sharpness, lam = expected_auc(matrix), discrimination(matrix)
    seeds = draw_seeds(policy)
    checks = []
    for seed in seeds:
        completed = base.assign(**{settings.column: draw_groups(matrix, list(settings.groups), seed)})
        result = check_attributes(target_model, completed, policy=policy, feature_spec=feature_spec,
                                  progress=progress, model_info=model_info)
        checks.append(result.sections[0].check)
    return estimated_outcome(checks, sharpness, seeds, policy, discrimination=lam)

