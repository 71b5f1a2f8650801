"""One decision engine, enough evidence, undefined rows counted, bounds instead of point values.

The engine (:func:`faux_checks.gate.decision.decide`) and the check's rules
(:func:`~faux_checks.gate.check_rules.check_rules`) with the values asserted; undefined rows counted as flagged,
a group of 3 among 1,000 left undecided, an infinite feature value named with its column; an all-undefined and an
empty run through every path (check_one_attribute, the streaming scorer, the Great Expectations suite, the drift
audit) never pass, whatever the policy says.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from _support import FAIR, UNFAIR, linear, make_data
from faux_checks.errors import InputError
from faux_checks.gate.bounds import (auc_interval, clopper_pearson, flagged_interval, quality_intervals,
                                     rows_needed)
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.check_rules import CheckEvidence, check_rules
from faux_checks.gate.decision import decide, rule_row
from faux_checks.gate.policy import Policy

SMALL = {"protected": "sex", "label": "y", "target_output": "logit",
         "faux": {"delta": 0.05, "max_flagged_fraction": 0.1}, "aux": {"epochs": 30},
         "decision": {"min_group_rows": 20}}
LENIENT = {**SMALL, "faux": {"delta": 0.05, "max_flagged_fraction": 1.0, "max_undefined_fraction": 1.0}}
# the auxiliary model's move reads its gradient (a flat aux model leaves every score undefined); the default matched
# move does not
AUX_MOVE = {**LENIENT, "faux": {**LENIENT["faux"], "swap_metric": "between"}}


def policy(payload=SMALL, **changes) -> Policy:
    return Policy.model_validate({**payload, **changes})


def evidence(n=1000, flagged=30, undefined=0, groups=None, holdout=None, aux_lower=0.9, seeds=None, testers=None,
             confidence=0.95) -> CheckEvidence:
    groups = groups or {"F": n // 2, "M": n - n // 2}
    return CheckEvidence(
        n=n, n_flagged=flagged, n_undefined=undefined, group_rows=groups,
        holdout_rows=holdout or {g: k // 5 for g, k in groups.items()}, aux_metric="roc_auc",
        aux_intervals=[{"what": "F vs M", "metric": "roc_auc", "quality": aux_lower + 0.02, "lower": aux_lower,
                        "upper": aux_lower + 0.04}],
        interval=flagged_interval(flagged + undefined, n, confidence, seeds), testers=testers or {},
        group_flagged={g: (flagged + undefined) * k / max(n, 1) for g, k in groups.items()})   # spread evenly


# ------------------------------------------------------------------------------------------- engine
def test_engine_one_rule_for_every_path():
    ok, over = rule_row("a", "ok", "a held"), rule_row("b", "exceeded", "b over")
    unmet, open_ = rule_row("c", "not met", "c missing"), rule_row("d", "inconclusive", "d straddles")
    assert decide([]).decision == "undecided" and "nothing was checked" in decide([]).reasons[0]
    assert (decide([ok]).decision, decide([ok]).exit_code) == ("passed", 0)
    failed = decide([unmet, over, ok])                  # a valid measurement over its limit beats a missing one
    assert (failed.decision, failed.exit_code, failed.reasons) == ("failed", 1, ["b over", "c missing"])
    undecided = decide([ok, open_, unmet])
    assert (undecided.decision, undecided.exit_code, undecided.reasons) == ("undecided", 2, ["d straddles", "c missing"])
    assert decide([rule_row("x", "fine", "?")]).decision == "undecided"        # an unknown status fails closed
    passed = decide([ok, rule_row("max_flagged_fraction", "ok", "fraction held")])
    assert passed.reasons == ["fraction held", "a held"]                        # the headline rule first


def test_flagged_fraction_rules_with_bounds():
    p = policy()                                       # limit 10%, confidence 0.95, rule interval
    low = decide(check_rules(evidence(n=1000, flagged=60), p))
    assert low.decision == "passed"                    # CP(60, 1000) = [4.6%, 7.7%] <= 10%
    high = decide(check_rules(evidence(n=1000, flagged=150), p))
    assert high.decision == "failed" and "even the lower bound exceeds it" in high.reasons[0]
    near = decide(check_rules(evidence(n=1000, flagged=105), p))   # 10.5%: CP [8.7%, 12.6%] straddles 10%
    assert near.decision == "undecided"
    lo, hi = clopper_pearson(105, 1000, 0.95)
    assert (round(lo, 4), round(hi, 4)) == (0.0867, 0.1257)
    needed = rows_needed(flagged_interval(105, 1000, 0.95), 0.10)
    assert f"more audit rows needed (about {needed:,} for an interval this side of the limit)" in near.reasons[0]
    assert clopper_pearson(round(0.105 * needed), needed, 0.95)[0] > 0.10            # N rows would decide it
    assert clopper_pearson(round(0.105 * needed * 0.9), round(needed * 0.9), 0.95)[0] <= 0.10
    assert needed == 15_000
    strict = decide(check_rules(evidence(n=1000, flagged=95), policy(decision={"rule": "upper_bound",
                                                                               "min_group_rows": 20})))
    assert strict.decision == "failed" and "its upper bound exceeds it (rule upper_bound)" in strict.reasons[0]
    assert decide(check_rules(evidence(n=1000, flagged=95), p)).decision == "undecided"


def test_issue_case_undefined_rows_count_as_flagged():
    """10 flagged of 85 defined scores, 15 undefined, limit 12%, max_undefined_fraction raised: the flagged fraction
    is 25% of 100 (undefined counted as flagged) and fails, not 11.8% of the 85 defined scores, which would pass."""
    p = policy(faux={"delta": 0.1, "max_flagged_fraction": 0.12, "max_undefined_fraction": 0.2})
    ev = evidence(n=100, flagged=10, undefined=15, groups={"F": 50, "M": 50}, holdout={"F": 50, "M": 50})
    out = decide(check_rules(ev, p))
    assert ev.interval.fraction == 0.25 and 10 / 85 < 0.12           # the defined scores alone would pass it
    assert [round(x, 4) for x in ev.interval.individuals] == [0.1688, 0.3466]
    assert out.decision == "failed"
    assert out.reasons[0] == ("flagged fraction 25.00% (95% CI 16.88%–34.66%) > max_flagged_fraction 12.00%: even the "
                              "lower bound exceeds it (LIC score > δ = 0.1: 10, undefined (counted as flagged): 15; "
                              "of 100 individuals)")


def test_insufficient_evidence_and_weak_aux_are_undecided_never_passed():
    p = policy(decision={"min_group_rows": 30})
    tiny = evidence(n=1000, flagged=0, groups={"A": 997, "B": 3}, holdout={"A": 199, "B": 1})
    out = decide(check_rules(tiny, p))
    assert out.decision == "undecided"
    assert out.reasons[0] == ("insufficient evidence: group 'B' has 3 of 1,000 rows (minimum 30); a decision needs "
                              "about 30 audited rows of 'B' (about 10,000 audited rows at its share of 0.3%); "
                              "insufficient evidence: group 'B' has 1 of 200 of the auxiliary model's held-out rows "
                              "(minimum 30); a decision needs about 90 audited rows of 'B' (about 30,000 audited rows "
                              "at its share of 0.3%)")   # 1 of B's 3 rows held out: 30 held out need 90 of B
    rules = {r["rule"]: r["status"] for r in out.rules}
    assert rules == {"min_group_rows": "not met", "min_aux_quality": "ok", "max_undefined_fraction": "ok",
                     "max_flagged_fraction": "not judged", "max_group_flagged_fraction": "not judged"}
    weak = decide(check_rules(evidence(flagged=0, aux_lower=0.65), policy()))   # AUC 0.67, CI 0.65–0.69: floor 0.7
    assert weak.decision == "undecided" and weak.reasons[0].startswith("auxiliary model too weak: roc_auc")
    # a gating tester over its limit still fails: a valid measurement, independent of the aux model
    tester = {"linked_columns": {"gating": True, "passed": False, "value": 0.3, "limit": 0.05, "summary": "30%"}}
    blocked = decide(check_rules(evidence(flagged=0, aux_lower=0.65, testers=tester), policy()))
    assert blocked.decision == "failed" and blocked.reasons[0].startswith("gating baseline tester exceeded its limit")
    # a gating tester that is not applicable to this model cannot judge it: undecided, never passed
    na = {"fta": {"gating": True, "passed": True, "value": None, "limit": 0.05,
                  "summary": "not applicable: fta needs the target's input gradient"}}
    blind = decide(check_rules(evidence(flagged=0, testers=na), policy()))
    assert blind.decision == "undecided" and blind.exit_code == 2
    assert blind.reasons[0] == ("gating baseline tester fta is not applicable: fta needs the target's input gradient; "
                                "the policy makes it gating, so the gate cannot decide: set [testers.fta] gating = false "
                                "for this model")
    reported = decide(check_rules(evidence(flagged=0, testers={"fta": {**na["fta"], "gating": False}}), policy()))
    assert reported.decision == "passed"


def test_aux_quality_per_group_with_intervals():
    # Hanley–McNeil: A = 0.9, 50 + 50 rows: SE² = (0.09 + 49·(0.9/1.1 − 0.81) + 49·(1.62/1.9 − 0.81)) / 2500
    se = math.sqrt((0.09 + 49 * (0.9 / 1.1 - 0.81) + 49 * (1.62 / 1.9 - 0.81)) / 2500)
    assert auc_interval(0.9, 50, 50, 0.95) == pytest.approx((0.9 - 1.959964 * se, 0.9 + 1.959964 * se), abs=1e-6)
    assert round(se, 4) == 0.0321
    assert auc_interval(0.95, 1, 199, 0.95)[0] < 0.7          # one held-out member: the floor is not met by luck
    # three groups: C looks like A (only B is separable). Macro AUC passes a 0.7 floor, C's own does not.
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], [450, 100, 450])
    score = np.column_stack([np.where(y == 1, 0.1, 0.45), np.where(y == 1, 0.8, 0.1), np.where(y == 1, 0.1, 0.45)])
    score = score + rng.normal(scale=0.01, size=score.shape)
    rows = quality_intervals("multiclass", y, score / score.sum(1, keepdims=True), ("A", "B", "C"), 0.95)
    from sklearn.metrics import roc_auc_score
    assert roc_auc_score(y, score / score.sum(1, keepdims=True), multi_class="ovr") > 0.7
    assert [r["what"] for r in rows] == ["A vs rest", "B vs rest", "C vs rest"]
    assert rows[1]["lower"] > 0.99 and rows[2]["quality"] < 0.65
    ev = dataclasses.replace(evidence(flagged=0), aux_metric="roc_auc_ovr_macro", aux_intervals=rows)
    out = decide(check_rules(ev, policy()))
    assert out.decision == "undecided" and "C vs rest" in out.reasons[0]


# ------------------------------------------------------------------------------------------- check_one_attribute
def test_a_tiny_group_through_check_one_attribute():
    """A group of 3 among 1,000: undecided, with the counts, never a plain pass."""
    data = make_data(1000, seed=3)
    data.loc[data.index[:3], "sex"] = "B"
    data = data[data["sex"] != "F"].reset_index(drop=True)          # groups B (3) and M
    data = pd.concat([data, make_data(1000 - len(data), seed=4).assign(sex="M")], ignore_index=True)
    result = check_one_attribute(linear(FAIR), data, policy=policy(decision={"min_group_rows": 30}))
    assert result.decision == "undecided" and result.exit_code == 2
    assert result.reasons[0].startswith("insufficient evidence: group 'B' has 3 of 1,000 rows (minimum 30)")
    held = {g["group"]: g for g in result.group_rows}
    # the single split would hold out 1 of B's rows: cross-fitted, in as many folds as B has rows (3), every row once
    assert held["B"]["audited"] == 3 and held["B"]["holdout"] == 3
    assert result.provenance["cross_fit"]["folds"] == 3
    assert result.aux_intervals[0]["n_positive"] + result.aux_intervals[0]["n_negative"] == 1000


def test_seeds_widen_the_interval_reproducibly_and_the_report_says_how_far_they_moved(tmp_path):
    from faux_checks.report.build import write_report

    data, p = make_data(400), policy(decision={"min_group_rows": 20, "aux_seeds": 3})
    target = linear([1.0, 0.0, 0.0, 0.0, 0.05])                      # a weak use of the proxy: scores near δ
    a, b = check_one_attribute(target, data, policy=p), check_one_attribute(target, data, policy=p)
    assert a.interval.to_dict() == b.interval.to_dict()             # same inputs and seed, same numbers
    seeds = a.interval.seeds
    assert seeds["seeds"] == [0, 1, 2] and seeds["rows"] == 400 and len(seeds["fractions"]) == 3
    assert seeds["fractions"][0] == a.flagged_fraction
    assert seeds["spread"] == pytest.approx(max(seeds["fractions"]) - min(seeds["fractions"]))
    lo, hi = a.interval.individuals
    assert a.interval.lower == pytest.approx(max(0, lo + min(0, min(seeds["fractions"]) - seeds["fractions"][0])))
    assert a.interval.upper == pytest.approx(min(1, hi + max(0, max(seeds["fractions"]) - seeds["fractions"][0])))
    one = check_one_attribute(target, data, policy=policy(decision={"min_group_rows": 20, "aux_seeds": 1}))
    assert one.interval.seeds is None and one.interval.individuals == a.interval.individuals
    paths = write_report(tmp_path / "r", decision=a.decision, reasons=a.reasons, check=a.to_dict())
    page = paths["html"].read_text()
    report = json.loads(paths["json"].read_text())
    assert report["check"]["interval"]["seeds"]["fractions"] == seeds["fractions"]
    assert "Across 3 auxiliary-model seeds (0, 1, 2), on 400 rows, the flagged fraction was" in page
    assert f"it moved by {seeds['spread']:.2%}" in page
    assert "Over the defined scores only" in page and report["rules"] == a.rules


def test_inf_in_a_feature_names_the_column_and_the_count():
    data = make_data(400)
    data.loc[data.index[[3, 7]], "f2"] = np.inf
    data.loc[data.index[9], "f2"] = -np.inf
    with pytest.raises(InputError, match=r"numeric column 'f2' has 3 infinite values \(\+inf 2, -inf 1\) in 400 rows"):
        check_one_attribute(linear(FAIR), data, policy=policy())


# ------------------------------------------------------------------------------------------- every path
class _FlatAux(nn.Module):
    """A given aux model that separates the groups (a step on the proxy) with a zero gradient everywhere."""

    def forward(self, x):
        return 4.0 * torch.sign(x[:, 4:5] - 1.0)


def _all_nan(monkeypatch):
    from faux_checks.method.faux import FAuxTester

    real = FAuxTester.evaluate

    def evaluate(self, X, c=None, *, evidence=True):
        res = real(self, X, c, evidence=evidence)
        return dataclasses.replace(res, scores=np.full_like(res.scores, np.nan), undefined=np.ones(len(res.scores), bool))

    monkeypatch.setattr(FAuxTester, "evaluate", evaluate)


def test_all_undefined_never_passes_check_one_attribute_and_the_stream(tmp_path):
    from faux_checks.gate.stream.run import score_stream

    data, p = make_data(400), policy(AUX_MOVE)
    result = check_one_attribute(linear(UNFAIR), data, policy=p, aux_model=_FlatAux())
    assert result.n_undefined == 400 and result.decision == "undecided"
    assert result.reasons[0].startswith("400 of 400 LIC scores are undefined: no individual has a defined LIC score")
    assert result.flagged_fraction == 1.0 and math.isnan(result.flagged_fraction_defined)
    data.to_parquet(tmp_path / "d.parquet")
    summary = score_stream(linear(UNFAIR), tmp_path / "d.parquet", policy=p, out_path=tmp_path / "s.parquet",
                           aux_model=_FlatAux())["sex"]
    assert (summary.n_undefined, summary.decision, summary.exit_code) == (400, "undecided", 2)
    assert summary.reasons[0] == result.reasons[0] and summary.flagged_fraction == 1.0


@pytest.mark.slow
def test_all_undefined_never_passes_the_gx_suite_and_the_audit(tmp_path, monkeypatch):
    import faux_checks_gx as E
    from faux_checks.audit.drift import run_audit
    from faux_checks.inputs.models import save_torchscript

    model = str(save_torchscript(linear(FAIR), tmp_path / "fair.pt"))
    aux = str(save_torchscript(_FlatAux(), tmp_path / "aux.pt"))
    p = policy(AUX_MOVE)
    outcome = E.validate_frame(make_data(400), E.build_suite(p, model_path=model, aux_model_path=aux))
    assert outcome.decision == "undecided" and outcome.exit_code == 2
    assert outcome.reasons[0].startswith("400 of 400 LIC scores are undefined")
    assert {r["rule"]: r["status"] for r in outcome.rules}["max_flagged_fraction"] == "not judged"
    _all_nan(monkeypatch)
    audit = run_audit(linear(FAIR), make_data(400), make_data(400, seed=1), policy=p)
    assert audit.decision == "undecided" and audit.exit_code == 2
    assert any("LIC scores are undefined" in r for r in audit.reasons)


def test_an_empty_run_never_passes_any_path(tmp_path):
    import faux_checks_gx as E
    from faux_checks.audit.drift import run_audit
    from faux_checks.gate.stream.run import score_stream
    from faux_checks.inputs.models import save_torchscript

    p = policy(LENIENT, missing_protected="drop")
    empty = make_data(400).iloc[:0]
    assert decide(check_rules(evidence(n=0, flagged=0, groups={"F": 0, "M": 0}), p)).decision == "undecided"
    with pytest.raises(InputError, match="0 rows"):
        check_one_attribute(linear(FAIR), empty, policy=p)
    no_protected = make_data(400).assign(sex=None)
    no_protected.to_parquet(tmp_path / "d.parquet")
    with pytest.raises(InputError, match="no non-missing values"):
        score_stream(linear(FAIR), tmp_path / "d.parquet", policy=p, out_path=tmp_path / "s.parquet")["sex"]
    model = str(save_torchscript(linear(FAIR), tmp_path / "fair.pt"))
    assert E.validate_frame(empty, E.build_suite(p, model_path=model)).decision == "undecided"
    assert run_audit(linear(FAIR), make_data(400), empty, policy=p).decision == "undecided"


def test_one_decision_to_exit_code_mapping_for_every_result():
    """Every result carrying a decision derives from Outcome, whose exit_code reads one table;
    no other module maps a decision to a code (the notebook's FairnessCheck delegates to its result)."""
    import pathlib
    import re

    from faux_checks_gx.suite import SuiteOutcome
    from faux_checks.audit.results import AuditResult
    from faux_checks.gate.attributes import AttributesResult
    from faux_checks.gate.decision import EXIT_CODES, Decision, Outcome, exit_code_for
    from faux_checks.gate.result import CheckResult
    from faux_checks.gate.stream.outcome import StreamResult
    from faux_checks.gate.stream.summary import StreamSummary

    for cls in (Decision, CheckResult, StreamSummary, AttributesResult, StreamResult, AuditResult,
                SuiteOutcome):
        assert issubclass(cls, Outcome) and "exit_code" not in vars(cls), cls
    assert EXIT_CODES == {"passed": 0, "failed": 1, "undecided": 2}
    assert [decide([rule_row("r", s, "d")]).exit_code for s in ("ok", "exceeded", "not met")] == [0, 1, 2]
    assert CheckResult.undecided("no data").exit_code == 2 and AuditResult.undecided("unreadable").exit_code == 2
    for bad in ("maybe", None):
        with pytest.raises(ValueError, match=rf"^decision {re.escape(repr(bad))} is not one of "
                                             r"\['passed', 'failed', 'undecided'\]"):
            exit_code_for(bad)
    root = pathlib.Path(__file__).resolve().parents[2]
    spelled = {str(p.relative_to(root)): p.read_text().count("EXIT_CODES[")
               for d in ("faux_checks", "faux_checks_app", "flows", "expectations") for p in (root / d).rglob("*.py")}
    assert {p: n for p, n in spelled.items() if n} == {"faux_checks/gate/decision.py": 1}
    defined = {str(p.relative_to(root)) for d in ("faux_checks", "faux_checks_app", "flows", "expectations")
               for p in (root / d).rglob("*.py") if "def exit_code(self)" in p.read_text()}
    assert defined == {"faux_checks/gate/decision.py", "faux_checks/notebook.py"}
