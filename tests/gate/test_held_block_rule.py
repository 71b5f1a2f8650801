"""Self-consistency: a report whose own numbers say the auxiliary model reads c from what the counterfactual holds
never passes; an admissible-only check with a jointly free held block passes without the aux floor."""

from __future__ import annotations

from faux_checks import load_policy
from faux_checks.gate.bounds import auc_interval, flagged_interval
from faux_checks.gate.check_rules import CheckEvidence, check_rules, held_block_rule
from faux_checks.gate.decision import decide

FREE = {"tested": True, "free": True, "columns": ["age", "joint_a"], "released_columns": [["joint_b"]],
        "metric": "roc_auc", "quality": 0.501, "n_positive": 1000, "n_negative": 1000, "gain": -0.02, "z": -6.2,
        "rows": 2000}
CARRIES = {**FREE, "free": False, "columns": ["age", "joint_a", "joint_b"], "released_columns": [], "quality": 0.95,
           "gain": 0.6, "z": 150.0}


def _policy():
    return load_policy(protected="sex").model_copy(update={"label": None})


def _evidence(block, *, aux_lower=0.9, nothing_free=False, flagged=0, n=2000) -> CheckEvidence:
    return CheckEvidence(n=n, n_flagged=flagged, n_undefined=0, group_rows={"F": n // 2, "M": n // 2},
                         holdout_rows={"F": 400, "M": 400}, aux_metric="roc_auc",
                         aux_intervals=[{"what": "F vs M", "metric": "roc_auc", "quality": aux_lower + 0.02,
                                         "lower": aux_lower, "upper": aux_lower + 0.04}],
                         interval=flagged_interval(flagged, n, 0.95), nothing_free=nothing_free,
                         group_flagged={"F": flagged / 2, "M": flagged / 2}, held_block=block)


def _rule(rows, name):
    (row,) = [r for r in rows if r["rule"] == name]
    return row


def test_a_held_block_that_carries_c_never_passes_though_nothing_is_flagged():
    rows = check_rules(_evidence(CARRIES), _policy())
    row = _rule(rows, "held_jointly_free")
    assert row["status"] == "not met" and row["observed"] == 150.0
    assert "reads the protected attribute from what the counterfactual holds" in row["detail"]
    lo, hi = auc_interval(0.95, 1000, 1000, 0.95)
    assert f"roc_auc 0.950 (CI {lo:.3f}–{hi:.3f})" in row["detail"] and "age, joint_a, joint_b" in row["detail"]
    assert _rule(rows, "max_flagged_fraction")["status"] == "ok"            # the fraction alone would pass
    assert decide(rows).decision == "undecided"


def test_a_clearly_unfair_model_still_fails_beside_the_rule():
    rows = check_rules(_evidence(CARRIES, flagged=1000), _policy())
    assert decide(rows).decision == "failed"


def test_an_untested_block_fails_closed_and_a_free_one_passes_with_its_figures():
    untested = {"tested": False, "free": False, "columns": ["age"], "reason": "too few rows", "z": None}
    row = _rule(check_rules(_evidence(untested), _policy()), "held_jointly_free")
    assert row["status"] == "not met" and "could not be tested together" in row["detail"] and "too few rows" in row["detail"]
    rows = check_rules(_evidence(FREE), _policy())
    row = _rule(rows, "held_jointly_free")
    assert row["status"] == "ok" and "released from the hold as carrying it jointly: joint_b" in row["detail"]
    assert decide(rows).decision == "passed"
    assert held_block_rule(_evidence(None)) == []                          # no joint test on this path: no row
    assert not any(r["rule"] == "held_jointly_free" for r in check_rules(_evidence(None), _policy()))


def test_nothing_free_with_a_free_block_lifts_the_aux_floor_and_reports_both_figures():
    rows = check_rules(_evidence(FREE, aux_lower=0.55, nothing_free=True), _policy())
    aux = _rule(rows, "min_aux_quality")
    assert aux["status"] == "ok" and aux["observed"] == 0.55
    assert "not applied: nothing is free to move" in aux["detail"]
    assert "roc_auc 0.570 (CI 0.550–0.590" in aux["detail"] and "cross-fitted roc_auc 0.501" in aux["detail"]
    assert decide(rows).decision == "passed"


def test_nothing_free_keeps_the_aux_floor_when_the_block_carries_c_or_is_not_tested():
    for block in (CARRIES, None):
        rows = check_rules(_evidence(block, aux_lower=0.55, nothing_free=True), _policy())
        assert _rule(rows, "min_aux_quality")["status"] == "not met"
        assert decide(rows).decision == "undecided"


def test_a_release_with_a_held_partner_says_what_the_data_do_not_identify():
    plain = _rule(check_rules(_evidence(FREE), _policy()), "held_jointly_free")["detail"]
    assert "not identified" not in plain                                   # no partner named: no note
    row = _rule(check_rules(_evidence({**FREE, "partner_columns": [["joint_a"]]}), _policy()), "held_jointly_free")
    assert row["status"] == "ok"
    assert ("released from the hold as carrying it jointly: joint_b [with joint_a held: it moves by its rank among "
            "people alike in those;") in row["detail"]
    assert "are not identified from the data, so the flagged fraction is the rank-preserving reading]" in row["detail"]
