"""Drift audit library (faux_checks.audit): column screening (C04), Evidently drift, audit decision."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks.gate.decision import EXIT_CODES
from faux_checks.gate.result import CheckResult
from faux_checks.audit.columns import column_drift, screen_columns
from faux_checks.audit.decision import decide_audit
from faux_checks.audit.drift import run_audit
from faux_checks.audit.results import ClassificationQuality, ColumnDrift, DriftResult, FairnessDrift
from faux_checks.errors import InputError
from faux_checks.gate.policy import AuditSettings, Policy, load_policy
from faux_checks.inputs.tabular import FeatureSpec

FEATURES = ["f0", "f1", "f2", "f3", "proxy", "cat"]
N = 600


def _data(n=N, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    df = pd.DataFrame(rng.normal(size=(n, 4)), columns=FEATURES[:4])
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=n)
    df["cat"] = rng.choice(["a", "b", "c", "rare"], n, p=[0.4, 0.3, 0.28, 0.02])
    df["sex"] = sex
    df["y"] = (df["f0"] > 0).astype(int)
    return df


def _c04(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """C04 columns: empty / constant / mixed types (and what the reference holds for them)."""
    rng = np.random.default_rng(seed)
    out = frame.copy()
    n = len(out)
    if seed == 0:  # reference
        out["empty"] = rng.normal(size=n)
        out["const"] = rng.normal(size=n)
        out["mixed"] = rng.choice(["x", "y"], n)
        out["ref_const"] = 7.0
        out["both_const"] = 5
        out["diff_const"] = 1.0
        out["gone"] = 1.0
    else:
        out["empty"] = np.nan
        out["const"] = 3.0
        out["mixed"] = pd.Series([("x" if i % 3 else i % 2) for i in range(n)], dtype=object)
        out["ref_const"] = np.where(rng.random(n) < 0.3, 8.0, 7.0)
        out["both_const"] = 5
        out["diff_const"] = 2.0
    return out


COLUMNS = {"f0": "feature", "sex": "protected", "empty": "other", "const": "other", "mixed": "other",
           "ref_const": "other", "both_const": "other", "diff_const": "other", "gone": "other"}


def test_screen_columns_says_what_it_skips_and_converts():
    ref, cur = _c04(_data(), 0), _c04(_data(seed=1), 1)
    r, c, kinds, pending, decided = screen_columns(ref, cur, COLUMNS, categorical=("sex",))
    by = {d.column: d for d in pending + decided}
    assert set(by) == set(COLUMNS)
    assert by["empty"].status == "skipped" and by["empty"].drifted is None
    assert by["empty"].note.startswith("entirely empty in the current batch (600 of 600 values missing)")
    assert by["empty"].current_missing == N
    assert by["gone"].status == "skipped" and by["gone"].note == "absent from the current batch"
    assert by["both_const"].method == "identical constant" and by["both_const"].drifted is False
    assert by["diff_const"].method == "different constants" and by["diff_const"].drifted is True
    assert "1 in the reference and 2 now" in by["diff_const"].note
    assert "mixed value types (int, str) in the current batch" in by["mixed"].note
    assert kinds["mixed"] == "categorical" and set(c["mixed"].unique()) == {"x", "0", "1"}
    assert "constant in the reference (7)" in by["ref_const"].note and kinds["ref_const"] == "categorical"
    assert set(c["ref_const"].unique()) == {"7", "not 7"}
    assert by["const"].note == "constant in the current batch (3)" and kinds["const"] == "numeric"
    assert kinds["sex"] == "categorical" and kinds["f0"] == "numeric"
    assert set(r.columns) == set(kinds) and len(r) == N        # the inputs are not modified
    assert "empty" in ref.columns and ref["mixed"].dtype == object


def test_column_drift_handles_c04_columns_with_evidently(tmp_path, caplog):
    ref, cur = _c04(_data(), 0), _c04(_data(seed=1), 1)
    cur["f0"] += 1.5                                           # one real drift
    with caplog.at_level(logging.INFO, logger="faux_checks.audit"):
        drift = column_drift(ref, cur, COLUMNS, categorical=("sex",), html_path=tmp_path / "drift.html")
    by = {c.column: c for c in drift.columns}
    assert [c.column for c in drift.columns] == list(COLUMNS)
    for c in drift.columns:
        if c.status == "compared":
            assert c.score is not None and np.isfinite(c.score) and isinstance(c.drifted, bool), c
        else:
            assert c.score is None and c.drifted is None and c.note
    assert by["f0"].drifted is True and by["sex"].drifted is False
    assert by["const"].drifted is True                         # 3.0 everywhere vs a standard normal
    assert by["ref_const"].drifted is True and by["mixed"].status == "compared"
    assert {s.column for s in drift.skipped} == {"empty", "gone"}
    assert drift.drifted_share == 0.5                          # f0 of (f0, sex); 'other' columns not counted
    assert "column 'empty' skipped: entirely empty" in caplog.text
    payload = drift.to_dict()
    json.dumps(payload, allow_nan=False)
    assert {"column": "empty", "reason": by["empty"].note} in payload["skipped"]
    assert (tmp_path / "drift.html").stat().st_size > 100_000


def _linear(weights) -> torch.nn.Module:
    lin = torch.nn.Linear(len(weights), 1)
    with torch.no_grad():
        lin.weight[:] = torch.tensor([weights], dtype=torch.float32)
        lin.bias.zero_()
    return lin


@pytest.fixture(scope="module")
def spec_and_model():
    spec = FeatureSpec.fit(_data(), FEATURES, min_frequency=20)   # 'rare' -> __infrequent__
    assert "__infrequent__" in spec.columns[-1].levels
    model = _linear([1.0, 0.5, 0.0, 0.0, 0.3] + [0.0] * (spec.n_features - 5))
    policy = Policy.model_validate({"protected": "sex", "label": "y", "min_aux_quality": 0.7, "aux": {"epochs": 10},
                                    "faux": {"delta": 0.05, "max_flagged_fraction": 0.2},
                                    "decision": {"min_group_rows": 20}})
    return spec, model, policy


def test_run_audit_uses_constant_and_mixed_model_features(spec_and_model, tmp_path):
    """C04 on the target's own inputs: a constant feature and a categorical one mixing str and int."""
    spec, model, policy = spec_and_model
    ref, cur = _c04(_data(), 0), _c04(_data(seed=1), 1)
    cur["f1"] = 0.25
    cur["cat"] = pd.Series([("a" if i % 4 else i % 3) for i in range(N)], dtype=object)   # 0/1/2 -> __infrequent__
    result = run_audit(model, ref, cur, policy=policy, feature_spec=spec, evidence_dir=tmp_path)
    assert result.fairness.error is None
    assert result.fairness.current.decision in ("passed", "failed")
    drift = {c.column: c for c in result.drift.columns}
    assert drift["f1"].note == "constant in the current batch (0.25)" and drift["f1"].drifted is True
    assert "mixed value types (int, str)" in drift["cat"].note
    assert drift["empty"].status == "skipped"
    assert any("drift not computed for 'empty' (entirely empty" in r for r in result.reasons)
    assert result.classification.status == "computed"
    assert set(result.classification.metrics) >= {"accuracy", "roc_auc"}
    payload = result.to_dict()
    json.dumps(payload, allow_nan=False)                        # no NaN passed on as a number
    assert payload["drift"]["skipped"][0]["column"] == "empty"
    name = policy.attribute_names[0]                            # one attribute: one section, timed under its name
    assert {"column_drift", f"fairness_drift.{name}", "classification", "column_drift.evidently_drift",
            f"fairness_drift.{name}.check_reference", f"fairness_drift.{name}.check_current"} <= set(result.timings)
    assert [a.attribute for a in result.attributes] == [name] and payload["provenance"]["deciding_attribute"] == name
    assert all(v >= 0 for v in result.timings.values())


def test_run_audit_with_an_empty_model_feature_is_undecided_and_names_it(spec_and_model):
    spec, model, policy = spec_and_model
    ref, cur = _data(), _data(seed=1)
    cur["f2"] = np.nan
    result = run_audit(model, ref, cur, policy=policy, feature_spec=spec)
    assert result.decision == "undecided" and result.exit_code == 2
    assert "the fAux check on the current batch could not run" in result.rule
    assert "column 'f2' is entirely empty (600 rows)" in result.rule
    f2 = result.drift.column("f2")
    assert f2.status == "skipped" and "entirely empty in the current batch" in f2.note
    assert result.classification.status == "skipped" and "'f2'" in result.classification.reason
    json.dumps(result.to_dict(), allow_nan=False)


# ---------------------------------------------------------------------------------- decision rule
def _check(ff: float, decision: str = "passed", groups=(("F", 300, None), ("M", 300, None))) -> CheckResult:
    rows = [{"group": g, "n": n, "flagged": 0, "flagged_fraction": ff if gff is None else gff, "undefined": 0,
             "mean_score": 0.0, "p90_score": 0.0} for g, n, gff in groups]
    return CheckResult(decision=decision, reasons=[f"{decision}: flagged {ff:.0%}"], flagged_fraction=ff,
                       max_flagged_fraction=0.2, delta=0.05, n_individuals=600,
                       by_group=pd.DataFrame(rows).set_index("group"))


def _drift(sex_drifted=False, n_feature_drifted=0, n_features=4) -> DriftResult:
    cols = [ColumnDrift(f"f{i}", "feature", "compared", "numeric", "Wasserstein", 0.2 if i < n_feature_drifted else 0.01,
                        0.1, i < n_feature_drifted) for i in range(n_features)]
    cols.append(ColumnDrift("sex", "protected", "compared", "categorical", "Jensen-Shannon distance",
                            0.3 if sex_drifted else 0.01, 0.1, sex_drifted))
    return DriftResult(columns=cols, n_reference=600, n_current=600)


def _fairness(ref_ff=0.05, cur_ff=0.06, ks=(0.05, 0.5), cur_decision="passed", cur_groups=None) -> FairnessDrift:
    from faux_checks.audit.fairness import _group_changes

    ref, cur = _check(ref_ff), _check(cur_ff, cur_decision, cur_groups or (("F", 300, None), ("M", 300, None)))
    return FairnessDrift(reference=ref, current=cur, ks_statistic=ks[0], ks_pvalue=ks[1], n_reference_scores=600,
                         n_current_scores=600, by_group=_group_changes(ref, cur, 30))


SKIPPED_CLS = ClassificationQuality("skipped", "the policy names no label column")


@pytest.mark.parametrize("drift, fairness, expected, first", [
    (_drift(), _fairness(), "passed", "all 7 audit limits held"),
    (_drift(sex_drifted=True), _fairness(), "failed", "the protected attribute 'sex' drifted"),
    (_drift(n_feature_drifted=3), _fairness(), "failed", "3 of 5 feature/protected columns drifted (60.00% > max_drifted_share 50.00%): "),
    (_drift(), _fairness(cur_ff=0.11), "failed", "flagged fraction 5.00% (reference) -> 11.00% (current): +6.00% >"),
    (_drift(), _fairness(cur_groups=(("F", 300, 0.2), ("M", 300, 0.05))), "failed", "group 'F': flagged fraction"),
    (_drift(), _fairness(ks=(0.3, 1e-6)), "failed", "LIC score distribution: KS statistic 0.300"),
    (_drift(), _fairness(ks=(0.05, 1e-6)), "passed", "all 7"),           # significant but negligible shift
    (_drift(), _fairness(cur_ff=0.3, cur_decision="failed"), "failed", "the gate's rule on the current batch: failed"),
    (_drift(), _fairness(cur_decision="undecided"), "undecided", "the fAux check on the current batch is undecided"),
    (_drift(), FairnessDrift(None, None, error="the fAux check on the current batch could not run: x"), "undecided",
     "the fAux check on the current batch could not run"),
])
def test_decide_audit(drift, fairness, expected, first):
    decision, reasons, limits = decide_audit(AuditSettings(), drift, [("sex", (), fairness)], SKIPPED_CLS,
                                             n_current=600)[:3]
    assert decision == expected, reasons
    assert reasons[0].startswith(first), reasons[0]
    assert all(set(l_) == {"rule", "observed", "limit", "status", "detail"} for l_ in limits)


def test_decide_audit_small_batch_and_auc_limit():
    settings = AuditSettings(min_rows=1000, max_roc_auc_drop=0.05)
    cls = ClassificationQuality("computed", metrics={"roc_auc": {"reference": 0.90, "current": 0.80}})
    decision, reasons, limits = decide_audit(settings, _drift(), [("sex", (), _fairness())], cls, n_current=1000)[:3]
    assert decision == "failed" and reasons[0].startswith("ROC-AUC 0.900 -> 0.800")
    # below audit.min_rows: undecided through the one engine, whatever was measured (a drop, a drift)
    for drift in (_drift(), _drift(sex_drifted=True)):
        decision, reasons, limits = decide_audit(settings, drift, [("sex", (), _fairness())], cls, n_current=600)[:3]
        assert decision == "undecided" and EXIT_CODES[decision] == 2
        assert reasons[0] == ("insufficient evidence: the current batch has 600 rows < audit.min_rows 1000; "
                              "too few to audit")
        assert {r["status"] for r in limits} == {"not met", "not judged"}
        assert any(r.startswith("not judged (audit.min_rows not met): ROC-AUC 0.900 -> 0.800") for r in reasons)


def test_policy_audit_section(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('protected = "sex"\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n'
                    '[audit]\nmax_drifted_share = 0.3\nscore_ks_pvalue = 0.001\nmax_rows = 5000\n')
    audit = load_policy(path).audit
    assert (audit.max_drifted_share, audit.score_ks_pvalue, audit.max_rows) == (0.3, 0.001, 5000)
    assert load_policy(None).audit == AuditSettings()
    path.write_text('protected = "sex"\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n[audit]\nmax_drift = 0.3\n')
    with pytest.raises(InputError, match="audit.max_drift"):
        load_policy(path)


def test_drift_share_details_show_two_decimals_like_every_other_share():
    """'0.00% <= max_drifted_share 50.00%', not '0%' / '50%' (reports show shares with two decimals)."""
    _, _, limits = decide_audit(AuditSettings(), _drift(), [("sex", (), _fairness())], SKIPPED_CLS, n_current=600)[:3]
    (row,) = [r for r in limits if r["rule"] == "max_drifted_share"]
    assert row["detail"] == "0 of 5 feature/protected columns drifted (0.00% <= max_drifted_share 50.00%)"
    assert row["status"] == "ok" and row["observed"] == 0.0 and row["limit"] == 0.5


def test_one_decide_audit_for_one_or_several_attributes():
    """One attribute is a list of one (unprefixed rows); with two, each attribute's rows are prefixed and
    the shared ones (drift share) appear once; the worst attribute decides."""
    drift = _drift(sex_drifted=True)
    drift = DriftResult(columns=drift.columns + [ColumnDrift("race", "protected", "compared", "categorical",
                                                             "Jensen-Shannon distance", 0.01, 0.1, False)],
                        n_reference=600, n_current=600)
    one = decide_audit(AuditSettings(), drift, [("race", (), _fairness())], SKIPPED_CLS, n_current=600)
    assert one[0] == "passed" and one[1][0] == "all 7 audit limits held"
    assert [r["rule"] for r in one[2]][:2] == ["protected_drift", "max_drifted_share"]
    decision, reasons, limits, per = decide_audit(AuditSettings(), drift, [("sex", (), _fairness()),
                                                                          ("race", (), _fairness())], SKIPPED_CLS,
                                                  n_current=600)
    rules = [r["rule"] for r in limits]
    assert rules[:3] == ["sex/protected_drift", "race/protected_drift", "max_drifted_share"]
    assert len(rules) == 2 * 6 + 1 and rules.count("max_drifted_share") == 1
    assert decision == "failed" and reasons[0].startswith("sex: the protected attribute 'sex' drifted")
    assert [d for d, _ in per] == ["failed", "passed"]
