"""A value target read against a business cut-off (``[faux] cutoff``, ``cutoff_side``): who crosses it.

Truth: :mod:`faux_checks.groundtruth.value` (Adult rows, limit = f(x) − β·c·g(x) EUR): limit(x, c) and
limit(x, 1 − c) are known per person, so whether each crosses the cut-off is known exactly
(:meth:`ValueData.true_crossing`). The closed-form tests build a swap result by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from faux_checks import FeatureSpec, ForwardOnlyTarget, Policy, load_policy
from faux_checks.gate.bounds import clopper_pearson
from faux_checks.gate.cutoff import CUTOFF_RULE, crosses_cutoff, cutoff_reading, cutoff_rule, on_favourable_side
from faux_checks.method.result import LICResult

CUTOFF, DELTA = 8000.0, 5000.0          # δ above any move of the limit: only the crossing reading can fail a model


def _policy(cutoff=CUTOFF, side="above", **decision) -> Policy:
    base = load_policy(protected="c").model_dump()
    return Policy.model_validate({**base, "label": None, "target_output": "value",
                                  "faux": {**base["faux"], "delta": DELTA, "unit": "EUR", "cutoff": cutoff,
                                           "cutoff_side": side},
                                  "aux": {**base["aux"], "epochs": 15},
                                  "decision": {**base["decision"], "aux_seeds": 1, **decision}})


def _lic(actual, counter, undefined=None) -> LICResult:
    actual, counter = np.asarray(actual, float), np.asarray(counter, float)
    undefined = np.zeros(len(actual), bool) if undefined is None else np.asarray(undefined, bool)
    return LICResult(scores=np.abs(counter - actual), undefined=undefined, evidence=None, probability=actual,
                     direct=None, counterfactual_probability=counter)


def test_crossing_is_a_change_of_side_at_the_cutoff_whatever_its_size():
    actual = np.array([640.0, 660.0, 700.0, 650.0, 649.99, np.nan, 600.0])
    counter = np.array([655.0, 650.0, 800.0, 649.0, 650.0, 700.0, 640.0])
    # 640 -> 655 crosses; 660 -> 650 stays (650 is on the 'at or above' side); 700 -> 800 moves 100 and stays;
    # 650 -> 649 crosses by 1; 649.99 -> 650 crosses; NaN never crosses here; 600 -> 640 stays below
    assert crosses_cutoff(actual, counter, 650.0).tolist() == [True, False, False, True, True, False, False]
    assert on_favourable_side(actual, 650.0, "above").tolist() == [False, True, True, True, False, False, False]
    assert on_favourable_side(actual, 650.0, "below").tolist() == [True, False, False, False, True, False, True]
    with pytest.raises(ValueError, match="'above' or 'below'"):
        on_favourable_side(actual, 650.0, "up")


@pytest.mark.parametrize("side, towards, away", [("above", 1, 2), ("below", 2, 1)])
def test_the_reading_counts_crossings_per_group_towards_and_away_from_the_favourable_side(side, towards, away):
    # group a: 640 -> 660 (up across), 700 -> 600 and 680 -> 640 (down across), 700 -> 720 (stays);
    # group b: an undefined row, 500 -> 520 (stays)
    lic = _lic([640, 700, 680, 700, 650, 500], [660, 600, 640, 720, 640, 520], undefined=[0, 0, 0, 0, 1, 0])
    labels = np.array(["a", "a", "a", "a", "b", "b"], dtype=object)
    reading = cutoff_reading(lic, labels, ["a", "b"], _policy(cutoff=650.0, side=side))
    assert reading is not None
    assert reading.crossed.tolist() == [True, True, True, False, False, False]   # the undefined row counted apart
    a, b = reading.by_group
    # 'above': 640 -> 660 is towards the favourable side, the two falls away from it; 'below': the reverse
    assert (a["to_favourable"], a["to_unfavourable"], a["crossed"], a["crossed_fraction"]) == (towards, away, 3, 0.75)
    assert (b["to_favourable"], b["to_unfavourable"], b["crossed"]) == (0, 0, 1)      # the undefined one, as crossing
    # on the favourable side as they are: 'above' a has 700, 680, 700 of 4, b 650 of 2; 'below' a has 640, b 500
    rates = (0.75, 0.5) if side == "above" else (0.25, 0.5)
    assert (a["favourable_rate"], b["favourable_rate"]) == rates
    assert (a["impact_ratio"], b["impact_ratio"]) == pytest.approx([r / max(rates) for r in rates])
    iv = reading.interval
    assert (iv.k, iv.n, iv.fraction) == (4, 6, 4 / 6)                   # 3 crossings + 1 undefined, over 6
    assert (iv.lower, iv.upper) == pytest.approx(clopper_pearson(4, 6, 0.95))
    record = reading.to_dict("c")
    assert record["reading"] == "crosses the cut-off 650 EUR" and record["n_crossed"] == 3 and record["n_undefined"] == 1
    assert record["favourable"] == ("650 EUR or more" if side == "above" else "below 650 EUR")
    assert record["sentences"][0].startswith("For 75% of group 'a' (3 of 4) the model output crosses the cut-off 650 "
                                             f"EUR if only 'c' changed: {towards} to the favourable side")
    assert cutoff_reading(lic, labels, ["a", "b"], load_policy(protected="c")) is None       # no cut-off


def test_the_rule_fails_passes_and_fails_closed_on_the_interval():
    labels = np.array(["a", "b"] * 500, dtype=object)
    base = np.full(1000, 700.0)
    policy = _policy(cutoff=650.0)
    many = cutoff_reading(_lic(base, np.where(np.arange(1000) < 200, 600.0, 720.0)), labels, ["a", "b"], policy)
    none = cutoff_reading(_lic(base, np.full(1000, 690.0)), labels, ["a", "b"], policy)
    (row,) = cutoff_rule(many, policy, [], True)
    assert row["rule"] == CUTOFF_RULE and row["status"] == "exceeded" and row["observed"] == pytest.approx(0.2)
    assert "share that crosses the cut-off 650 EUR: 20.00%" in row["detail"]
    assert cutoff_rule(none, policy, [], True)[0]["status"] == "ok"           # CP upper bound of 0/1000 is 0.37%
    assert cutoff_rule(None, policy, [], True)[0]["status"] == "not computed"  # a path without the reading
    assert cutoff_rule(none, policy, [{"rule": "max_undefined_fraction"}], False)[0]["status"] == "not judged"
    assert cutoff_rule(None, load_policy(protected="c"), [], True) == []     # no cut-off, no rule


@pytest.mark.parametrize("change, words", [
    ({"target_output": "auto", "faux": {"unit": None, "delta": 0.1}},
     "[faux] cutoff = 650 is set but target_output = 'auto'"),
    ({"faux": {"cutoff_side": None}}, "cutoff and cutoff_side go together"),
    ({"faux": {"variant": "faux"}}, "only variant 'swap' computes"),
    ({"faux": {"cutoff": None}}, "set cutoff or remove cutoff_side"),
    ({"faux": {"cutoff_side": "up"}}, "cutoff_side"),
])
def test_a_cutoff_policy_that_cannot_be_read_is_refused_naming_the_key(change, words):
    good = _policy(cutoff=650.0).model_dump()
    bad = {**good, **{k: v for k, v in change.items() if k != "faux"}, "faux": {**good["faux"], **change.get("faux", {})}}
    with pytest.raises(Exception) as info:
        Policy.model_validate(bad)
    assert words in str(info.value), str(info.value)


def test_a_policy_without_a_cutoff_keeps_its_hash():
    policy = load_policy(protected="c")
    payload = json.dumps(policy.model_dump(mode="json"))
    assert '"cutoff"' in payload                                     # the key exists ...
    assert _policy(cutoff=650.0).sha256() != _policy(cutoff=700.0).sha256()
    dumped = policy.model_dump()
    assert Policy.model_validate({**dumped, "faux": {k: v for k, v in dumped["faux"].items()
                                                     if k not in ("cutoff", "cutoff_side")}}).sha256() == policy.sha256()


def _limit_check(beta: float, seed: int = 0):
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.groundtruth.value import VALUE_COLUMNS, exact_limit_target, make_value_data
    from faux_checks.inputs.datasets import load_adult

    data = make_value_data(load_adult(), n=3000, beta=beta, seed=seed)
    spec = FeatureSpec.fit(data.frame(), columns=[*VALUE_COLUMNS, "proxy_linear", "proxy_nonlinear",
                                                  "proxy_category", "proxy_legit", "c"])
    target = ForwardOnlyTarget(exact_limit_target(data, spec), access="forward (exact limit)", output_form="value")
    return data, check_one_attribute(target, data.frame(), policy=_policy(), feature_spec=spec)


@pytest.mark.slow        # one gate on 3,000 rows (aux training, sensitivity): 10-30 s
def test_the_share_that_crosses_equals_the_true_share_within_its_interval_and_the_unfair_limit_fails(tmp_path):
    data, res = _limit_check(beta=0.5)
    truth = data.true_crossing_share(CUTOFF)
    assert 0.15 < truth < 0.19                                  # the generator: about 17% cross 8,000 EUR
    reading = res.outcome["cutoff"]
    iv = reading["interval"]
    assert iv["lower"] <= truth <= iv["upper"] and iv["fraction"] == pytest.approx(truth, abs=0.01)
    # who crosses: the swap reading's counterfactual of the exact limit is limit(x, 1 − c)
    assert reading["n_crossed"] == pytest.approx(data.true_crossing(CUTOFF).sum(), abs=0.01 * len(data))
    rules = {r["rule"]: r["status"] for r in res.rules}
    assert rules["max_flagged_fraction"] == "ok" and rules[CUTOFF_RULE] == "exceeded"   # δ = 5,000 EUR flags no one
    assert res.decision == "failed" and res.flagged_fraction == 0.0
    # the disadvantaged group (c = 1, g1) crosses only towards the favourable side, the other only away from it
    g0, g1 = reading["by_group"]
    assert g1["to_unfavourable"] == 0 and g1["to_favourable"] > 0 and g0["to_favourable"] == 0
    from faux_checks.gate.decision import summary_line
    from faux_checks.report.build import write_report

    assert "crosses the cut-off 8000 EUR" in summary_line(res)
    paths = write_report(tmp_path / "r", decision=res.decision, reasons=res.reasons, check=res.to_dict())
    page, report = paths["html"].read_text(), json.loads(paths["json"].read_text())
    assert report["check"]["outcome"]["cutoff"]["unit"] == "EUR" and report["policy"]["faux"]["cutoff"] == CUTOFF
    assert "Who crosses the cut-off 8000 EUR" in page and "favourable side: 8000 EUR or more" in page
    from faux_checks.report.limitations import limitations

    assert any(t["topic"] == "cutoff" and "crosses the cut-off 8000 EUR" in t["text"] for t in limitations(report))


@pytest.mark.slow        # one gate on 3,000 rows (aux training, sensitivity): 10-30 s
def test_a_fair_limit_crosses_nothing_and_passes():
    data, res = _limit_check(beta=0.0)
    assert data.true_crossing_share(CUTOFF) == 0.0
    assert res.outcome["cutoff"]["n_crossed"] == 0 and res.outcome["cutoff"]["interval"]["fraction"] == 0.0
    assert {r["rule"]: r["status"] for r in res.rules}[CUTOFF_RULE] == "ok" and res.decision == "passed"


def test_a_path_without_the_reading_cannot_pass_a_cutoff_policy():
    """The streaming scorer's rules (check_rules without a reading): a cut-off policy is undecided, never passed;
    with the reading, the same evidence passes."""
    from faux_checks.gate.bounds import flagged_interval
    from faux_checks.gate.check_rules import CheckEvidence, check_rules
    from faux_checks.gate.decision import decide

    aux = [{"metric": "roc_auc", "quality": 0.9, "lower": 0.88, "upper": 0.92, "what": "held-out"}]
    evidence = CheckEvidence(n=1000, n_flagged=0, n_undefined=0, group_rows={"a": 500, "b": 500},
                             holdout_rows={"a": 500, "b": 500}, aux_metric="roc_auc", aux_intervals=aux,
                             interval=flagged_interval(0, 1000, 0.95), group_flagged={"a": 0.0, "b": 0.0})
    policy = _policy(cutoff=650.0)
    rows = check_rules(evidence, policy)
    assert {r["rule"]: r["status"] for r in rows}[CUTOFF_RULE] == "not computed"
    assert decide(rows).decision == "undecided"
    labels = np.array(["a", "b"] * 500, dtype=object)
    reading = cutoff_reading(_lic(np.full(1000, 700.0), np.full(1000, 690.0)), labels, ["a", "b"], policy)
    assert decide(check_rules(evidence, policy, reading)).decision == "passed"
