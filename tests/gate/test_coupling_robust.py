"""Rule ``level_coupling``: a categorical move read under every coupling the data cannot tell apart.

Counts are chosen so that each reading's Clopper–Pearson interval lies on a known side of the limit (n = 2,000,
limit 5%: 1.0% passes with an upper bound near 1.5%, 20% fails with a lower bound near 18%). Under ``"auto"``
readings that disagree leave the check undecided (never passed, and not failed on one coupling alone); a coupling
named by the policy decides; agreement is reported as "decision robust across 2 of 2 readings". End to end, the
in-memory check records every reading and the Fréchet bounds in its provenance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from faux_checks import AuxiliaryModel, FeatureSpec, load_policy
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.bounds import flagged_interval
from faux_checks.gate.check_rules import CheckEvidence, check_rules
from faux_checks.gate.couplings import coupling_rule, reading_decision, used_coupling
from faux_checks.gate.decision import decide
from faux_checks.groundtruth.zipcode import make_zip_data

N = 2000
AUX = [{"metric": "roc_auc", "quality": 0.9, "lower": 0.88, "upper": 0.92, "what": "held-out"}]
BOUNDS = {"flagged_lower": 0.004, "flagged_upper": 0.61, "change_lower": 0.2, "change_upper": 1.0,
          "enumerated_mass": 1.0, "n": N}


def _policy(coupling: str = "auto"):
    p = load_policy(protected="c").model_copy(update={"label": None})
    return p.model_copy(update={"faux": p.faux.model_copy(update={"swap_coupling": coupling,
                                                                  "max_flagged_fraction": 0.05})})


def _couplings(policy, comonotone: float, gumbel: float) -> dict:
    return {"applies": True, "setting": policy.faux.swap_coupling, "used": used_coupling(policy.faux.swap_coupling,
                                                                                          "binary"),
            "readings": {"comonotone": comonotone, "gumbel": gumbel}, "bounds": BOUNDS, "columns": ["zip"], "n": N}


def _evidence(policy, comonotone: float, gumbel: float, couplings="readings") -> CheckEvidence:
    """The check's own fraction is the used coupling's reading."""
    c = _couplings(policy, comonotone, gumbel) if couplings == "readings" else couplings
    used = c["readings"][c["used"]] if c and c.get("applies") else gumbel
    k = round(used * N)
    return CheckEvidence(n=N, n_flagged=k, n_undefined=0, group_rows={"g0": N // 2, "g1": N // 2},
                         holdout_rows={"g0": N // 2, "g1": N // 2}, aux_metric="roc_auc", aux_intervals=AUX,
                         interval=flagged_interval(k, N, 0.95), group_flagged={"g0": k / 2, "g1": k / 2},
                         couplings=c)


def _row(rows, name="level_coupling"):
    (row,) = [r for r in rows if r["rule"] == name]
    return row


def test_each_reading_is_judged_by_the_interval_rule():
    assert reading_decision(flagged_interval(20, N, 0.95), 0.05) == "passed"
    assert reading_decision(flagged_interval(400, N, 0.95), 0.05) == "failed"
    assert reading_decision(flagged_interval(100, N, 0.95), 0.05) == "inconclusive"
    assert reading_decision(flagged_interval(100, N, 0.95), 0.05, "upper_bound") == "failed"
    assert used_coupling("auto", "binary") == "gumbel" and used_coupling("auto", "continuous") == "comonotone"


def test_auto_with_disagreeing_readings_is_undecided_never_passed_nor_failed_on_one_coupling():
    policy = _policy("auto")
    for comonotone, gumbel in [(0.01, 0.20), (0.20, 0.01)]:       # the used (Gumbel) reading fails, then passes
        rows = check_rules(_evidence(policy, comonotone, gumbel), policy)
        outcome = decide(rows)
        assert outcome.decision == "undecided"
        row = _row(rows)
        assert row["status"] == "not met" and (row["observed"], row["limit"]) == (1, 2)
        assert row["detail"].startswith("decision robust across 1 of 2 readings")
        assert "swap_coupling" in row["detail"] and "0.4%–61.0% flagged" in row["detail"]
        assert _row(rows, "max_flagged_fraction")["status"] in ("ok", "not judged")
        assert any("different decisions" in reason for reason in outcome.reasons)


def test_a_coupling_named_by_the_policy_decides():
    for coupling, decision in [("comonotone", "passed"), ("gumbel", "failed")]:
        policy = _policy(coupling)
        rows = check_rules(_evidence(policy, 0.01, 0.20), policy)
        assert decide(rows).decision == decision
        row = _row(rows)
        assert row["status"] == "ok"
        assert row["detail"].startswith(f"decision robust across 1 of 2 readings: decided by the policy's coupling "
                                        f"'{coupling}'")


@pytest.mark.parametrize("fractions, decision", [((0.010, 0.012), "passed"), ((0.20, 0.31), "failed")])
def test_agreeing_readings_are_robust_across_every_reading(fractions, decision):
    policy = _policy("auto")
    rows = check_rules(_evidence(policy, *fractions), policy)
    assert decide(rows).decision == decision
    row = _row(rows)
    assert row["status"] == "ok" and row["detail"].startswith("decision robust across 2 of 2 readings")
    assert "gumbel (used)" in row["detail"] and "column(s) zip" in row["detail"]
    assert "the check reads 'gumbel' (swap_coupling 'auto': Gumbel-max for groups" in row["detail"]


def test_the_rule_has_no_row_where_it_does_not_apply_nor_without_readings():
    policy = _policy("auto")
    rows = check_rules(_evidence(policy, 0.01, 0.01, couplings={"applies": False, "reason": "no categorical feature "
                                                                "is free to move"}), policy)
    assert not [r for r in rows if r["rule"] == "level_coupling"] and decide(rows).decision == "passed"
    rows = check_rules(_evidence(policy, 0.01, 0.01, couplings=None), policy)     # the streaming path: no readings
    assert not [r for r in rows if r["rule"] == "level_coupling"]
    assert coupling_rule(None, policy, flagged_interval(20, N, 0.95)) == []


class _Linear(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(torch.as_tensor(w, dtype=torch.float32)[:, None], requires_grad=False)

    def forward(self, x):
        return x @ self.w


def test_the_check_records_every_reading_and_the_bounds_and_says_the_decision_is_robust():
    """An 8-level zip-code proxy (inverse-CDF generator) and a target whose log-odds fall by 3 per unit of place."""
    base = pd.DataFrame({"x": np.random.default_rng(0).normal(size=1500)})
    data = make_zip_data(base, coupling="inverse_cdf", levels=8, strength=1.5, seed=0)
    frame = data.frame().assign(c=data.protected())
    spec = FeatureSpec.fit(frame, ["x", "zip"], min_frequency=1)
    X = spec.encode(frame)
    zip_cols = np.flatnonzero(spec.feature_to_column() == spec.source_columns.index("zip"))
    w = np.zeros(X.shape[1])
    w[zip_cols] = -3.0 * (2.0 * np.arange(8) / 7 - 1.0)                   # levels z00 … z07 in order
    aux = AuxiliaryModel(kind="binary", seed=0, epochs=20).fit(X, data.c)
    policy = load_policy(protected="c").model_copy(update={"label": None})
    result = check_one_attribute(_Linear(w), frame, policy=policy, feature_spec=spec, aux_model=aux)
    couplings = result.provenance["couplings"]
    assert couplings["applies"] and couplings["columns"] == ["zip"] and couplings["used"] == "gumbel"
    readings, bounds = couplings["readings"], couplings["bounds"]
    assert readings["gumbel"] == pytest.approx(result.flagged_fraction, abs=1 / 1500)   # the check's own figure
    assert bounds["flagged_lower"] <= min(readings.values()) <= max(readings.values()) <= bounds["flagged_upper"]
    assert bounds["change_lower"] > 0.1 and bounds["enumerated_mass"] == pytest.approx(1.0)
    row = _row(result.rules)
    assert result.decision == "failed" and row["detail"].startswith("decision robust across 2 of 2 readings")


def test_the_report_s_limitations_say_what_the_coupling_leaves_open():
    from faux_checks.report.limitations import limitations

    couplings = {**_couplings(_policy(), 0.31, 0.32), "bounds": BOUNDS}
    report = {"check": {"provenance": {"couplings": couplings}}, "policy": {"protected": "c"}, "decision": "failed"}
    (text,) = [s["text"] for s in limitations(report) if s["topic"] == "coupling"]
    assert "zip" in text and "comonotone 31.0%; gumbel 32.0%; over every coupling 0.4%–61.0%" in text
    report["check"]["provenance"]["couplings"] = {"applies": False, "reason": "no categorical feature is free"}
    assert not [s for s in limitations(report) if s["topic"] == "coupling"]
