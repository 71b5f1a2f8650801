"""The direction of the outcome (policy favourable_label): the group table, the text-label refusal, the per-group
sentences of which way people move."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks.baselines.group_metrics import group_table
from faux_checks.errors import InputError
from faux_checks.gate.outcome import outcome_direction
from faux_checks.gate.policy import load_policy
from faux_checks.inputs.labels import encode_labels, label_meaning


def _denials():
    """Group A: 10 people, 5 predicted denied (50%); group B: 10 people, 1 predicted denied (10%)."""
    groups = pd.DataFrame({"race": ["A"] * 10 + ["B"] * 10})
    denied = np.array([1] * 5 + [0] * 5 + [1] + [0] * 9)
    return denied, np.where(denied == 1, 0.8, 0.2), groups


def test_on_an_adverse_label_the_group_denied_least_is_most_favoured():
    denied, p, groups = _denials()
    by = {r["group"]: r for r in group_table(denied, p, groups, favourable=False)}
    assert by["A"]["predicted_rate"] == 0.5 and by["B"]["predicted_rate"] == pytest.approx(0.1)
    assert by["A"]["favourable_rate"] == 0.5 and by["B"]["favourable_rate"] == pytest.approx(0.9)
    assert by["B"]["most_favoured"] is True and by["A"]["most_favoured"] is False
    assert by["A"]["impact_ratio"] == pytest.approx(0.5 / 0.9) and by["B"]["impact_ratio"] == pytest.approx(1.0)
    # read the other way (the deny event taken as favourable) the table inverts: A would be "most favoured", B at 0.2
    wrong = {r["group"]: r for r in group_table(denied, p, groups, favourable=True)}
    assert wrong["A"]["most_favoured"] is True and wrong["B"]["impact_ratio"] == pytest.approx(0.2)
    # undeclared: the rates of the event are there, no favourable rate, impact ratio or most favoured group
    plain = {r["group"]: r for r in group_table(denied, p, groups)}
    assert plain["A"]["predicted_rate"] == 0.5
    assert all(plain[g][k] is None for g in "AB" for k in ("favourable_rate", "impact_ratio", "most_favoured"))


def _deny_policy(**top):
    return load_policy(protected="sex", label="deny", positive_label="yes").with_overrides(**top)


def test_the_favourable_label_is_read_against_the_label_column():
    frame = pd.DataFrame({"deny": ["yes", "no", "no", None], "sex": list("FMFM")})
    d = outcome_direction(_deny_policy(favourable_label="no"), frame)
    assert (d.target_value, d.target_favourable, d.probability_name) == ("yes", False, "P(deny = yes)")
    assert outcome_direction(_deny_policy(favourable_label="yes"), frame).target_favourable is True
    undeclared = outcome_direction(_deny_policy(), frame)
    assert undeclared.target_favourable is None and undeclared.to_dict()["declared"] is False
    with pytest.raises(InputError) as err:
        outcome_direction(_deny_policy(favourable_label="approved"), frame)
    assert "favourable_label = 'approved' is not a value of the label column 'deny' (values: 'no', 'yes')" in str(err.value)
    # class indices: "1" = 1 = 1.0; target_class 0 reverses it; a word without positive_label is refused
    numbers = pd.DataFrame({"y": [0.0, 1.0, 1.0], "sex": list("FMF")})
    policy = load_policy(protected="sex", label="y", favourable_label="1")
    assert outcome_direction(policy, numbers).target_favourable is True
    assert outcome_direction(policy.with_overrides(target_class=0), numbers).target_favourable is False
    with pytest.raises(InputError, match="favourable_label = '2' is not a value of the label column 'y'"):
        outcome_direction(policy.with_overrides(favourable_label="2"), numbers)
    with pytest.raises(InputError, match="without positive_label the label holds class indices"):
        outcome_direction(load_policy(protected="sex", favourable_label="no"))


def test_the_text_label_refusal_reads_deny_labels_as_adverse():
    with pytest.raises(InputError) as err:
        encode_labels(pd.Series(["no", "yes", "no", "no"]), column="deny")
    msg = str(err.value)
    assert "'yes' is the adverse outcome and 'no' the favourable one" in msg
    assert 'positive_label = "yes" and favourable_label = "no"' in msg and "P(deny = yes)" in msg
    assert 'positive_label = "no"' not in msg                                  # the inverting suggestion is gone
    assert label_meaning("decision", ["approved", "denied"])[:2] == ("denied", "approved")
    assert label_meaning("loan_default", ["Y", "N"])[:2] == ("Y", "N")
    assert label_meaning("approved", ["yes", "no"])[:2] == ("no", "yes")
    assert label_meaning("status", ["bad", "good"])[:2] == ("bad", "good")
    # no meaning to read: both choices listed, neither picked
    assert label_meaning("y", ["yes", "no"]) is None and label_meaning("deny", ["a", "b", "c"]) is None
    with pytest.raises(InputError) as err:
        encode_labels(pd.Series(["no", "yes"]), column="y")
    msg = str(err.value)
    assert 'positive_label = "no" or positive_label = "yes"' in msg and 'favourable_label = "no" or "yes"' in msg
    assert "adverse" not in msg


class _ProxyDenial(torch.nn.Module):
    """P(deny = yes) = 0.2 + 0.15·proxy: linear in the proxy, which is higher and wider spread in group M."""

    def forward(self, x):
        return (0.2 + 0.15 * x[:, :1]).clamp(0.0, 1.0)


def _denial_frame(n=1200, seed=5):
    rng = np.random.default_rng(seed)
    male = rng.integers(0, 2, n)
    spread = np.where(male == 1, 0.8, 0.3)                  # matched by rank, a man moves by -(1 + 0.5 z)
    return pd.DataFrame({"proxy": male + spread * rng.normal(size=n), "z": rng.normal(size=n),
                         "sex": np.where(male == 1, "M", "F"), "deny": np.where(rng.random(n) < 0.3, "yes", "no")})


def _check(policy_overrides):
    from faux_checks import FeatureSpec
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.policy import Policy

    df = _denial_frame()
    spec = FeatureSpec.fit(df, ["proxy", "z"], name="denial")
    policy = Policy.model_validate({
        "protected": "sex", "label": "deny", "positive_label": "yes", "target_output": "probability",
        "min_aux_quality": 0.5, "faux": {"delta": 0.1, "max_flagged_fraction": 0.05}, "aux": {"epochs": 5},
        "decision": {"min_group_rows": 50, "aux_seeds": 1}, **policy_overrides})
    return df, check_one_attribute(_ProxyDenial(), df, policy=policy, feature_spec=spec)


def test_the_report_says_per_group_which_way_the_probability_moves():
    df, result = _check({"favourable_label": "no"})
    out = result.to_dict()["outcome"]
    assert out["probability"] == "P(deny = yes)" and out["target_favourable"] is False
    by_group = result.by_group
    moves = {m["group"]: m for m in out["by_group"]}
    # the target rises with the proxy: every flagged man's P(deny) falls as a woman, every flagged woman's rises
    assert moves["M"]["rise"] == 0 and moves["M"]["fall"] == pytest.approx(by_group.loc["M", "flagged"])
    assert moves["F"]["fall"] == 0 and moves["F"]["rise"] == pytest.approx(by_group.loc["F", "flagged"])
    n_m = int((df["sex"] == "M").sum())
    assert moves["M"]["n"] == n_m and 0.5 * n_m < moves["M"]["fall"] < n_m      # men at low ranks move by less
    share = moves["M"]["fall"] / n_m
    sentence = next(s for s in out["sentences"] if "group 'M'" in s)
    assert sentence.startswith(f"For {share:.0%} of group 'M' ({round(moves['M']['fall']):,} of {n_m:,}) the "
                               "estimated P(deny = yes) would fall by more than 10 points if only 'sex' changed "
                               "(towards the favourable outcome 'no': as they are, the model treats them less "
                               "favourably); for no one would it rise by that much.")
    table = {r["group"]: r for r in result.group_table}
    assert table["F"]["most_favoured"] is True and table["M"]["most_favoured"] is False   # men are denied more


def test_undeclared_direction_calls_no_group_favoured_and_names_the_key():
    _, result = _check({})
    out = result.to_dict()["outcome"]
    assert out["declared"] is False and out["target_favourable"] is None
    assert "not declared (policy favourable_label" in out["sentences"][-1]
    assert all(r["most_favoured"] is None and r["impact_ratio"] is None for r in result.group_table)
    from faux_checks.report.limitations import limitations

    topics = {i["topic"]: i["text"] for i in limitations({"check": result.to_dict(), "policy": {}})}
    assert "P(deny = yes) would change" in topics["reading"] and "favourable_label" in topics["outcome"]
