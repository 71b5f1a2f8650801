"""Per-group rules that gate (``[decision] max_group_flagged_fraction``, ``max_group_flagged_ratio``).

Truth: counts chosen so that the Clopper-Pearson bounds are on a known side of each limit (the bounds are
recomputed here with scipy's exact binomial test), and an end-to-end check whose small group is flagged by
construction: the target reads the proxy only where a declared (held) column is high, and only the small group has
it high.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from faux_checks import load_policy
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.bounds import flagged_interval
from faux_checks.gate.check_rules import CheckEvidence, check_rules, group_intervals
from faux_checks.gate.decision import decide

AUX = [{"metric": "roc_auc", "quality": 0.9, "lower": 0.88, "upper": 0.92, "what": "held-out"}]


def _policy(**decision):
    p = load_policy(protected="age_group").model_copy(update={"label": None})
    return p.model_copy(update={"decision": p.decision.model_copy(update=decision)})


def _evidence(groups: dict[str, tuple[int, int]]) -> CheckEvidence:
    """groups: name -> (rows, flagged)."""
    n = sum(r for r, _ in groups.values())
    k = sum(f for _, f in groups.values())
    return CheckEvidence(n=n, n_flagged=k, n_undefined=0, group_rows={g: r for g, (r, _) in groups.items()},
                         holdout_rows={g: r for g, (r, _) in groups.items()}, aux_metric="roc_auc", aux_intervals=AUX,
                         interval=flagged_interval(k, n, 0.95), group_flagged={g: float(f) for g, (_, f) in groups.items()})


def _rule(rows, name):
    (row,) = [r for r in rows if r["rule"] == name]
    return row


def test_a_pass_overall_with_a_heavily_flagged_small_group_fails_the_per_group_rule():
    # a small group heavily flagged: 34.1% of a group holding 4.8% of the rows, the overall fraction under 5%
    ev = _evidence({"young": (9520, 236), "old": (480, 164)})
    rows = check_rules(ev, _policy())
    assert _rule(rows, "max_flagged_fraction")["status"] == "ok"               # 4.00%, upper bound 4.40% <= 5%
    group = _rule(rows, "max_group_flagged_fraction")
    assert group["status"] == "exceeded" and group["limit"] == pytest.approx(0.10)   # default: 2 × 5%
    assert group["observed"] == pytest.approx(164 / 480)
    lower = binomtest(164, 480).proportion_ci(confidence_level=1 - 0.05 / 2, method="exact").low  # Bonferroni, 2 groups
    assert f"CI {lower:.2%}" in group["detail"] and "'old' 34.17%" in group["detail"]
    outcome = decide(rows)
    assert outcome.decision == "failed" and outcome.exit_code == 1


def test_a_group_above_the_limit_but_not_clearly_passes_and_is_named():
    # 14/120 = 11.7% > 10%, but its lower bound (Bonferroni 97.5%) is about 5.8%
    ev = _evidence({"young": (9880, 300), "old": (120, 14)})
    g = {r["group"]: r for r in group_intervals(ev, _policy())}["old"]
    assert g["lower"] < 0.10 < g["fraction"]
    row = _rule(check_rules(ev, _policy()), "max_group_flagged_fraction")
    assert row["status"] == "ok" and "above the limit but not clearly" in row["detail"] and "'old' 11.67%" in row["detail"]


def test_a_group_under_the_minimum_is_reported_not_judged_and_an_explicit_limit_applies():
    ev = _evidence({"young": (9900, 300), "old": (100, 60), "tiny": (40, 40)})
    rows = check_rules(ev, _policy(min_group_rows=100, max_group_flagged_fraction=0.8))
    assert _rule(rows, "min_group_rows")["status"] == "not met"                     # 'tiny' < 100: undecided overall
    ev = _evidence({"young": (9900, 300), "old": (100, 60)})
    row = _rule(check_rules(ev, _policy(max_group_flagged_fraction=0.8)), "max_group_flagged_fraction")
    assert row["status"] == "ok" and row["limit"] == 0.8                           # 60% < 80%
    policy = _policy(min_group_rows=50)
    groups = group_intervals(_evidence({"young": (9900, 300), "old": (100, 60), "tiny": (40, 40)}), policy)
    assert [g["judged"] for g in groups] == [True, True, False]
    assert groups[0]["confidence"] == pytest.approx(1 - 0.05 / 2)                   # Bonferroni over the 2 judged


def test_the_ratio_rule_is_off_by_default_and_judged_on_the_intervals_when_set():
    ev = _evidence({"a": (5000, 50), "b": (5000, 200)})                             # 1% and 4%: 4×
    assert not [r for r in check_rules(ev, _policy()) if r["rule"] == "max_group_flagged_ratio"]
    row = _rule(check_rules(ev, _policy(max_group_flagged_ratio=2.0)), "max_group_flagged_ratio")
    lo_b = binomtest(200, 5000).proportion_ci(confidence_level=0.975, method="exact").low
    hi_a = binomtest(50, 5000).proportion_ci(confidence_level=0.975, method="exact").high
    assert row["status"] == "exceeded" and row["observed"] == pytest.approx(lo_b / hi_a)
    assert _rule(check_rules(ev, _policy(max_group_flagged_ratio=5.0)), "max_group_flagged_ratio")["status"] == "ok"


def test_a_path_without_per_group_counts_cannot_pass_the_per_group_rule():
    ev = _evidence({"a": (5000, 50), "b": (5000, 60)})
    ev = CheckEvidence(**{**ev.__dict__, "group_flagged": None})
    row = _rule(check_rules(ev, _policy()), "max_group_flagged_fraction")
    assert row["status"] == "not computed" and decide(check_rules(ev, _policy())).decision == "undecided"


def test_check_one_attribute_fails_a_model_that_passes_overall_but_flags_most_of_a_small_group():
    rng = np.random.default_rng(0)
    n = 3000
    small = rng.random(n) < 0.06
    df = pd.DataFrame({"f0": rng.normal(size=n), "f1": rng.normal(size=n)})
    df["proxy"] = 2.0 * small + rng.normal(scale=0.5, size=n)
    df["held"] = np.where(small, rng.normal(2.0, 0.3, n), rng.normal(-1.0, 0.3, n))   # declared admissible
    df["group"] = np.where(small, "small", "large")
    import torch

    class Target(torch.nn.Module):                                  # reads the proxy only where 'held' is high
        def forward(self, x):
            gate = torch.sigmoid(8 * (x[:, 3] - 0.5))
            return (0.3 * x[:, 0] + 3.0 * gate * (x[:, 2] - 1.0))[:, None]
    p = load_policy(protected="group").model_copy(update={"label": None})
    policy = p.model_copy(update={
        "faux": p.faux.model_copy(update={"admissible": ("held",), "max_flagged_fraction": 0.1}),
        "aux": p.aux.model_copy(update={"epochs": 20}),
        "decision": p.decision.model_copy(update={"aux_seeds": 1, "min_group_rows": 30})})
    res = check_one_attribute(Target().eval(), df[["f0", "f1", "proxy", "held", "group"]], policy=policy)
    rules = {r["rule"]: r for r in res.rules}
    by_group = res.by_group["flagged_fraction"]
    assert by_group["small"] > 0.5 and res.flagged_fraction < 0.1, (by_group.to_dict(), res.flagged_fraction)
    assert rules["max_flagged_fraction"]["status"] == "ok", rules["max_flagged_fraction"]["detail"]
    assert rules["max_group_flagged_fraction"]["status"] == "exceeded"
    assert res.decision == "failed" and res.exit_code == 1   # measured: 6.0% overall (upper 6.9%), small 99.5%
