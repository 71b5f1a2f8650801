"""The counterfactual moves only what the protected attribute moves: metrics, holds, level switches.

Closed forms on linear generators, a proxy built multiplicatively from a legitimate feature (the fair control
must score 0), an admissible-only target (score 0 by definition), the exact level couplings against their
definitions, the continuous rank matching, and many-to-many linked columns on a hand-made frame.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from faux_checks import AuxiliaryModel, FAuxTester, FeatureSpec, TargetOutput
from faux_checks.baselines.linked_columns import LinkedColumnsTester, linked_candidates, parse_links
from faux_checks.errors import InputError
from faux_checks.method.counterfactual import SwapSettings
from faux_checks.method.levels import comonotone_transition, configurations, fit_level_model, gumbel_transition
from faux_checks.method.held import independent_features
from faux_checks.method.metric import covariance_metric
from faux_checks.method.swap import fit_swap_reference


# ---------------------------------------------------------------------------- metrics: closed forms
def _linear(n=200_000, seed=0):
    """x_F = μ_c + B x_A + ε: two free features, one admissible; c binary with p = 0.3; Δμ = (1, 0.5)."""
    rng = np.random.default_rng(seed)
    c = (rng.random(n) < 0.3).astype(np.int64)
    xa = rng.normal(size=n)
    S = np.array([[1.0, 0.6], [0.6, 2.0]])                                 # within-group covariance of ε
    eps = rng.multivariate_normal([0, 0], S, size=n)
    xf = np.outer(c, [1.0, 0.5]) + np.outer(xa, [0.7, -0.4]) + eps
    return np.column_stack([xf, xa]), c, S


def test_explained_within_and_total_metrics_have_their_closed_forms():
    X, c, S = _linear()
    A = np.array([False, False, True])
    dmu = np.array([1.0, 0.5])
    between = 0.3 * 0.7 * np.outer(dmu, dmu)                                # p (1 − p) Δμ Δμᵀ
    explained = covariance_metric(X, admissible=A, c=c, kind="binary", part="explained")
    within = covariance_metric(X, admissible=A, c=c, kind="binary", part="within")
    total = covariance_metric(X, admissible=A)
    np.testing.assert_allclose(explained[:2, :2], between, atol=0.01)
    np.testing.assert_allclose(within[:2, :2], S, atol=0.02)
    np.testing.assert_allclose(total[:2, :2], S + between, atol=0.02)       # total = explained + within
    np.testing.assert_allclose(explained + within, total, atol=1e-2)
    assert not explained[2].any() and not explained[:, 2].any()            # the admissible feature never moves
    assert np.linalg.matrix_rank(explained[:2, :2], tol=1e-6) == 1          # a binary c explains one direction


def test_the_between_metric_does_not_condition_on_an_admissible_mediator():
    """Conditioning on a mediator m = z + c makes z and c dependent though c does not cause z."""
    rng = np.random.default_rng(1)
    n = 100_000
    c = rng.integers(0, 2, n)
    z = rng.normal(size=n)                                                 # a legitimate feature
    m = z + c + 0.3 * rng.normal(size=n)                                   # the mediator (admissible)
    X = np.column_stack([z, m])
    A = np.array([False, True])
    given = covariance_metric(X, admissible=A, c=c, kind="binary", part="explained")
    between = covariance_metric(X, admissible=A, c=c, kind="binary", part="between")
    assert given[0, 0] > 0.05                                              # induced by conditioning on m
    assert between[0, 0] < 1e-3                                            # z's mean is the same in both groups


def test_the_interaction_case_a_proxy_built_from_a_legitimate_feature():
    """t = l·(1 + 0.8c) + noise: c shifts t by 0.8·E[l]; l's distribution is the same in both groups."""
    rng = np.random.default_rng(2)
    n = 200_000
    c = rng.integers(0, 2, n)
    l = rng.gamma(4.0, 0.5, n)                                             # noqa: E741 - l as in the docstring; E[l] = 2
    t = l * (1 + 0.8 * c) + 0.5 * rng.normal(size=n)
    X = np.column_stack([l, t])
    between = covariance_metric(X, c=c, kind="binary", part="between")
    np.testing.assert_allclose(between[1, 1], 0.25 * (0.8 * 2.0) ** 2, rtol=0.03)
    assert abs(between[0, 0]) < 1e-3 and abs(between[0, 1]) < 0.01
    total = covariance_metric(X)
    assert total[0, 1] > 0.9                                               # l and t covary through l itself
    held, table = independent_features(X, c, kind="binary", groups=[[0], [1]])
    assert held.tolist() == [True, False]                                  # l is held, the proxy moves
    assert table[0]["p_value"] > 0.01 and table[1]["p_value"] < 1e-10


# ---------------------------------------------------------------------------- the fair control and the admissible-only target
class _Logistic(nn.Module):
    def __init__(self, w, b=0.0):
        super().__init__()
        self.w = nn.Parameter(torch.as_tensor(w, dtype=torch.float32)[:, None], requires_grad=False)
        self.b = b

    def forward(self, x):
        return x @ self.w + self.b


def _ratio_data(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 2, n)
    l = np.maximum(0.1, 2.0 + rng.normal(size=n))  # noqa: E741 - l as in the docstring
    t = l * (1 + 0.8 * c) + 0.5 * rng.normal(size=n)
    return np.column_stack([(l - 2.0), (t - t.mean()) / t.std()]).astype(np.float32), c


def _swap_scores(X, c, target, *, hold_independent, admissible=None, categorical="soft", groups=(), metric="between"):
    aux = AuxiliaryModel(kind="binary", seed=0, epochs=40).fit(X, c)
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput("logit"),
                        swap=SwapSettings(line_search=2, categorical=categorical, categorical_groups=groups))
    hold = aux.holdout_rows_
    tester.fit_reference(X, c, admissible=admissible, holdout=(X[hold], c[hold]), hold_independent=hold_independent,
                         metric=metric)
    return tester, tester.evaluate(X, c, evidence=False)


def test_a_fair_model_of_the_legitimate_feature_scores_zero_when_independent_columns_are_held():
    X, c = _ratio_data()
    fair = _Logistic([3.0, 0.0])                                           # reads l only: fair by construction
    tester, held = _swap_scores(X, c, fair, hold_independent=True)
    assert tester.held_fixed_.tolist() == [True, False]
    assert np.nanmax(held.scores) == 0.0 and not held.undefined.any()
    # the covariance metric, nothing held: l moves
    _, moved = _swap_scores(X, c, fair, hold_independent=False, metric="covariance")
    assert np.mean(moved.scores > 0.1) > 0.05


def test_an_admissible_only_target_scores_zero_and_the_check_says_why():
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.policy import Policy

    rng = np.random.default_rng(3)
    n = 3000
    sex = rng.integers(0, 2, n)
    z = rng.normal(size=n)
    df = pd.DataFrame({"z": z, "w": rng.normal(size=n), "mediator": z + sex + 0.3 * rng.normal(size=n),
                       "sex": np.where(sex == 1, "M", "F")})
    spec = FeatureSpec.fit(df, ["z", "w", "mediator"], name="mediated")
    target = _Logistic([1.0, 0.5, 2.0])                                    # uses the mediator: fair by declaration
    policy = Policy.model_validate({
        "protected": "sex", "target_output": "logit", "min_aux_quality": 0.7,
        "faux": {"delta": 0.1, "max_flagged_fraction": 0.05, "admissible": ["mediator"]},
        "aux": {"epochs": 10}, "decision": {"min_group_rows": 50, "aux_seeds": 1}})
    result = check_one_attribute(target, df, policy=policy, feature_spec=spec)
    assert result.decision == "passed"
    assert np.nanmax(result.scores) == 0.0 and result.n_undefined == 0
    assert any("nothing outside the declared columns carries 'sex'" in r for r in result.reasons)
    roles = {r["column"]: r["role"] for r in result.provenance["swap"]["columns"]}
    assert roles == {"z": "independent", "w": "independent", "mediator": "declared"}
    aux_rule = next(r for r in result.rules if r["rule"] == "min_aux_quality")
    assert aux_rule["status"] == "ok" and "not applied: nothing is free to move" in aux_rule["detail"]
    assert "roc_auc 0." in aux_rule["detail"] and "held columns z, w: cross-fitted roc_auc" in aux_rule["detail"]
    assert next(r for r in result.rules if r["rule"] == "held_jointly_free")["status"] == "ok"


def test_an_admissible_only_target_passes_under_a_weak_auxiliary_model():
    """The mediator carries c weakly (aux ROC-AUC under the 0.7 floor): nothing is free, so the floor does not apply."""
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.policy import Policy

    rng = np.random.default_rng(5)
    n = 3000
    sex = rng.integers(0, 2, n)
    z = rng.normal(size=n)
    df = pd.DataFrame({"z": z, "w": rng.normal(size=n), "mediator": z + 0.3 * sex + 0.3 * rng.normal(size=n),
                       "sex": np.where(sex == 1, "M", "F")})
    spec = FeatureSpec.fit(df, ["z", "w", "mediator"], name="mediated")
    policy = Policy.model_validate({
        "protected": "sex", "target_output": "logit", "min_aux_quality": 0.7,
        "faux": {"delta": 0.1, "max_flagged_fraction": 0.05, "admissible": ["mediator"]},
        "aux": {"epochs": 10, "cross_fit_folds": 0}, "decision": {"min_group_rows": 50, "aux_seeds": 1}})
    result = check_one_attribute(_Logistic([1.0, 0.5, 2.0]), df, policy=policy, feature_spec=spec)
    aux_rule = next(r for r in result.rules if r["rule"] == "min_aux_quality")
    assert aux_rule["observed"] < 0.7                                      # the floor would not be met
    assert result.decision == "passed" and result.flagged_fraction == 0.0
    assert aux_rule["status"] == "ok" and aux_rule["detail"].startswith("not applied: nothing is free to move")


# ---------------------------------------------------------------------------- level couplings
def test_comonotone_transition_keeps_each_person_s_rank_along_the_likelihood_ratio_order():
    p_from = np.array([[0.5, 0.3, 0.2]] * 3)
    p_to = np.array([[0.2, 0.3, 0.5]] * 3)                                 # LR 0.4, 1, 2.5: order 0, 1, 2
    T = comonotone_transition(p_from, p_to, np.array([0, 1, 2]))
    np.testing.assert_allclose(T[0], [0.4, 0.6, 0.0])                      # [0, .5] over [0, .2], [.2, .5]
    np.testing.assert_allclose(T[1], [0.0, 0.0, 1.0])                      # [.5, .8] inside [.5, 1]
    np.testing.assert_allclose(T[2], [0.0, 0.0, 1.0])
    # the coupling's margin is the counterfactual distribution: Σ_k p_from(k) T(k → j) = p_to(j)
    np.testing.assert_allclose(p_from[0] @ T, p_to[0], atol=1e-12)


def test_gumbel_max_coupling_of_two_levels_is_min_one_p_new_over_p():
    """K = 2: the difference of the two Gumbels is logistic, so P(stay at k) = min(1, p′_k / p_k) exactly."""
    logits_from = np.array([[0.0, 0.8], [0.0, 0.8], [0.0, -1.0]])
    logits_to = np.array([[0.0, -0.5], [0.0, -0.5], [0.0, 0.3]])
    current = np.array([1, 0, 0])
    T = gumbel_transition(logits_from, logits_to, current)
    p = lambda z: 1 / (1 + np.exp(-z))                                      # noqa: E731  P(level 1)
    assert T[0, 1] == pytest.approx(min(1.0, p(-0.5) / p(0.8)), abs=1e-9)
    assert T[1, 0] == pytest.approx(1.0, abs=1e-12)                        # level 0 gains mass: everyone stays
    assert T[2, 0] == pytest.approx(min(1.0, (1 - p(0.3)) / (1 - p(-1.0))), abs=1e-9)


def test_the_closed_form_gumbel_transition_matches_the_sampled_posterior():
    """K = 5, random logits: the closed form (our derivation) against 200,000 posterior draws per row."""
    from faux_checks.method.levels import gumbel_transition_sampled

    rng = np.random.default_rng(8)
    lf, lt = 1.5 * rng.normal(size=(6, 5)), 1.5 * rng.normal(size=(6, 5))
    current = rng.integers(0, 5, 6)
    exact = gumbel_transition(lf, lt, current)
    sampled = gumbel_transition_sampled(lf, lt, current, draws=200_000)
    np.testing.assert_allclose(exact, sampled, atol=0.005)                 # ~4 standard errors of the draws
    np.testing.assert_allclose(exact.sum(axis=1), 1.0)
    # the coupling's margin is the counterfactual distribution
    p_from = np.exp(lf[0]) / np.exp(lf[0]).sum()
    T = gumbel_transition(np.repeat(lf[:1], 5, 0), np.repeat(lt[:1], 5, 0), np.arange(5))
    np.testing.assert_allclose(p_from @ T, np.exp(lt[0]) / np.exp(lt[0]).sum(), atol=1e-4)


def test_configurations_are_the_exact_product_of_the_groups_level_probabilities():
    x1 = torch.tensor([[0.5, 9.0, 9.0, 9.0, 9.0, 9.0]])                    # one numeric, two one-hot groups
    g1, g2 = np.array([1, 2]), np.array([3, 4, 5])
    p1, p2 = np.array([[0.7, 0.3]]), np.array([[0.5, 0.25, 0.25]])
    configs, w = configurations(x1, [g1, g2], [p1, p2], max_configs=8)
    assert configs.shape == (1, 6, 6) and w.sum() == pytest.approx(1.0)
    got = {tuple(configs[0, k, 1:].int().tolist()): w[0, k] for k in range(6)}
    for i in range(2):
        for j in range(3):
            key = tuple(np.eye(2, dtype=int)[i].tolist() + np.eye(3, dtype=int)[j].tolist())
            assert got[key] == pytest.approx(p1[0, i] * p2[0, j])
    assert torch.all(configs[0, :, 0] == 0.5)                              # the numeric feature is kept
    _, w2 = configurations(x1, [g1, g2], [p1, p2], max_configs=2)          # truncated: the two most probable
    assert w2[0].tolist() == pytest.approx([0.35 / 0.525, 0.175 / 0.525])


def test_the_level_model_reads_a_level_that_depends_on_c_and_an_admissible_feature():
    rng = np.random.default_rng(4)
    n = 20_000
    c = rng.integers(0, 2, n)
    married = rng.integers(0, 2, n)
    level = np.where(married == 1, np.where(c == 1, 0, 1), 2)              # husband / wife / single
    X = np.column_stack([married, np.eye(3)[level]]).astype(float)
    model = fit_level_model(X, c, [1, 2, 3], admissible=np.array([True, False, False, False]), kind="binary")
    p_men = model.probabilities(np.array([[1.0]]), np.array([1]))[0]
    p_women = model.probabilities(np.array([[1.0]]), np.array([0]))[0]
    assert p_men[0] > 0.97 and p_women[1] > 0.97                           # married men husbands, married women wives
    T = gumbel_transition(model.logits(np.array([[1.0]]), np.array([1])),
                          model.logits(np.array([[1.0]]), np.array([0])), np.array([0]))
    assert T[0, 1] > 0.95                                                  # a husband's counterfactual is a wife


def test_a_coupled_target_reading_a_categorical_proxy_is_flagged_with_its_switch_probability():
    """An ordered 3-level proxy of a binary c; the target's log-odds jump by 6 at level 2: expected flags match."""
    rng = np.random.default_rng(5)
    n = 8000
    c = rng.integers(0, 2, n)
    u = rng.random(n)
    cuts = {0: (0.6, 0.9), 1: (0.3, 0.7)}                                  # P(level) per group, inverse-CDF coupling

    def level_of(cc):
        lo = np.where(cc == 1, cuts[1][0], cuts[0][0])
        hi = np.where(cc == 1, cuts[1][1], cuts[0][1])
        return np.where(u < lo, 0, np.where(u < hi, 1, 2))

    level = level_of(c)
    X = np.column_stack([rng.normal(size=n), np.eye(3)[level]]).astype(np.float32)
    target = _Logistic([0.0, 0.0, 0.0, 6.0], b=-3.0)
    truth = (level_of(1 - c) == 2) != (level == 2)                         # flagged iff level 2 is entered or left
    _, lic = _swap_scores(X, c, target, hold_independent=True, categorical="coupled",
                          groups=[np.array([1, 2, 3])])
    assert lic.outcomes is not None
    assert truth.mean() == pytest.approx(0.2, abs=0.02)                    # u in [0.7, 0.9): the closed form
    assert np.mean(lic.decision_weights(0.1)) == pytest.approx(truth.mean(), abs=0.03)


# ---------------------------------------------------------------------------- continuous rank matching
def test_continuous_rank_matching_gives_each_person_their_own_slope():
    """v = c + (1 + 0.5c)·z: at c ± 1 a person of rank z moves by 1 + 0.5z, not by one global slope 1."""
    rng = np.random.default_rng(6)
    n = 40_000
    c = rng.normal(size=n)
    z = rng.normal(size=n)
    v = c + (1 + 0.5 * c) * z
    ref = fit_swap_reference(v[:, None], np.zeros((n, 1)), c, kind="continuous", admissible=np.array([True]))
    rows = (np.abs(c) < 0.3) & (np.abs(z) < 1.5)
    goal = ref.continuous.goal(v[rows], c[rows], np.zeros((rows.sum(), 1)), +1.0)
    expected = v[rows] + 1 + 0.5 * z[rows]                                 # (c + 1) + (1 + 0.5(c + 1)) z
    assert np.corrcoef(goal - v[rows], 1 + 0.5 * z[rows])[0, 1] > 0.95
    assert np.median(np.abs(goal - expected)) < 0.1
    assert ref.slope == pytest.approx(1.0, abs=0.05)                       # the one global slope of 'slope' matching


# ---------------------------------------------------------------------------- many-to-many linked columns
def test_many_to_many_links_on_a_hand_made_frame():
    frame = pd.DataFrame({"sex": ["F", "F", "M", "M"], "race": ["A", "B", "A", "B"],
                          "name": ["ann", "bea", "carl", "cole"], "x": [1.0, 2.0, 3.0, 4.0]})
    links = {"name": {"by": "race", "F": {"A": ["ann", "amy"], "B": "bea"}, "M": {"A": "carl", "B": ["cole", "cy"]}}}
    (link,) = parse_links(links)
    assert link.tied("F", "A") == ("ann", "amy") and link.tied("M", "B") == ("cole", "cy")
    frames, w = linked_candidates(frame, protected="sex", groups=frame["sex"].to_numpy(),
                                  to_groups=np.array(["M", "M", "F", "F"]), links=links)
    assert [f["name"].tolist() for f in frames] == [["carl", "cole", "ann", "bea"], ["carl", "cy", "amy", "bea"]]
    np.testing.assert_allclose(w, [[1, 0], [0.5, 0.5], [0.5, 0.5], [1, 0]])
    assert frames[0]["sex"].tolist() == ["M", "M", "F", "F"]
    value = {"carl": 0.9, "cole": 0.7, "cy": 0.1, "ann": 0.2, "amy": 0.6, "bea": 0.5}
    predict = lambda f: f["name"].map(value).to_numpy()                    # noqa: E731
    tester = LinkedColumnsTester(predict, protected="sex", links=links, groups=("F", "M"))
    both = tester.scores(frame, np.array([0, 0, 1, 1]))
    np.testing.assert_allclose(both["mean"], [0.7, (0.2 + 0.4) / 2, (0.7 + 0.3) / 2, 0.2])
    np.testing.assert_allclose(both["max"], [0.7, 0.4, 0.7, 0.2])
    np.testing.assert_allclose(tester.score(frame, np.array([0, 0, 1, 1])), both["mean"])


def test_a_value_tied_to_two_groups_is_refused_with_its_name():
    with pytest.raises(InputError, match="ties value 'sam' to groups 'F' and 'M'"):
        parse_links({"name": {"F": ["ann", "sam"], "M": ["sam", "carl"]}})
    with pytest.raises(InputError, match="must map each value of 'race'"):
        parse_links({"name": {"by": "race", "F": "ann"}})


def test_the_gate_s_own_aux_model_given_back_reproduces_its_score():
    """A given aux model is measured and its reference fitted on the gate's own split."""
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.policy import Policy

    rng = np.random.default_rng(7)
    n = 2000
    sex = rng.integers(0, 2, n)
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "proxy": sex + 0.7 * rng.normal(size=n),
                       "sex": np.where(sex == 1, "M", "F")})
    spec = FeatureSpec.fit(df, ["a", "b", "proxy"], name="p")
    target = _Logistic([0.5, 0.0, 1.5])
    policy = Policy.model_validate({
        "protected": "sex", "target_output": "logit", "min_aux_quality": 0.5,
        "faux": {"delta": 0.1, "max_flagged_fraction": 0.05}, "aux": {"epochs": 10},
        "decision": {"min_group_rows": 50, "aux_seeds": 1}})
    gate = check_one_attribute(target, df, policy=policy, feature_spec=spec)
    again = check_one_attribute(target, df, policy=policy, feature_spec=spec, aux_model=gate.aux_model.net_)
    assert gate.flagged_fraction > 0.2
    assert again.flagged_fraction == pytest.approx(gate.flagged_fraction, abs=1e-12)
    assert again.provenance["swap"]["held_fixed_uninformative"] == gate.provenance["swap"]["held_fixed_uninformative"]
    assert again.aux_quality == pytest.approx(gate.aux_quality, abs=1e-6)


def test_the_matched_move_takes_each_feature_to_its_rank_in_the_other_group():
    """x | c = g ~ N(μ_g + β a, σ_g²): the matched value is μ_b + β a + (σ_b / σ_a)(x − μ_a − β a), person by person."""
    rng = np.random.default_rng(9)
    n = 60_000
    c = rng.integers(0, 2, n)
    a = rng.normal(size=n)                                                 # a held feature
    mu, sd = np.array([0.0, 1.5]), np.array([1.0, 2.0])
    x = mu[c] + 0.7 * a + sd[c] * rng.normal(size=n)
    X = np.column_stack([x, a])
    ref = fit_swap_reference(np.zeros((n, 1)), X, c, kind="binary", admissible=np.array([False, True]),
                             metric="matched", matched=np.array([True, False]))
    probe = np.array([[0.0, 0.0], [1.0, 0.5], [-2.0, -1.0]])
    held = np.array([False, True])
    got = ref.matching.values(probe, held, np.zeros(3, int), np.ones(3, int))[:, 0]
    expected = mu[1] + 0.7 * probe[:, 1] + (sd[1] / sd[0]) * (probe[:, 0] - mu[0] - 0.7 * probe[:, 1])
    np.testing.assert_allclose(got, expected, atol=0.06)
    back = ref.matching.values(probe, held, np.ones(3, int), np.zeros(3, int))[:, 0]
    np.testing.assert_allclose(back, mu[0] + 0.7 * probe[:, 1] + (probe[:, 0] - mu[1] - 0.7 * probe[:, 1]) / 2,
                               atol=0.06)
    again = type(ref).from_dict(ref.to_dict())                             # shipped to workers as JSON
    np.testing.assert_allclose(again.matching.values(probe, held, np.zeros(3, int), np.ones(3, int))[:, 0], got)


def test_a_fair_model_scores_zero_and_a_multiplicative_proxy_is_read_with_the_matched_move():
    """t = l (1 + 0.8c) + ½ε, l held (independent of c): the matched t′ − t is ±0.8 l, a jump per person."""
    rng = np.random.default_rng(0)
    n = 8000
    c = rng.integers(0, 2, n)
    l = np.maximum(0.1, 2.0 + rng.normal(size=n))  # noqa: E741 - l as in the docstring
    t = l * (1 + 0.8 * c) + 0.5 * rng.normal(size=n)
    s = t.std()
    X = np.column_stack([l - 2.0, (t - t.mean()) / s]).astype(np.float32)
    _, fair = _swap_scores(X, c, _Logistic([3.0, 0.0]), hold_independent=True, metric="matched")
    assert np.nanmax(fair.scores) == 0.0                                   # the model of l alone: nothing moves l
    _, lic = _swap_scores(X, c, _Logistic([0.0, 3.0]), hold_independent=True, metric="matched")
    z = 3.0 * X[:, 1].astype(np.float64)
    shift = np.where(c == 0, 1.0, -1.0) * 3.0 * 0.8 * l / s               # the logit's matched change
    expected = np.abs(1 / (1 + np.exp(-(z + shift))) - 1 / (1 + np.exp(-z)))
    inner = (l > 0.5) & (l < 3.5)                                          # where the linear fits are exact
    assert np.median(np.abs(lic.scores[inner] - expected[inner])) < 0.01
    assert np.corrcoef(lic.scores[inner], expected[inner])[0, 1] > 0.97
