"""The protected attribute joined from a linked file (faux_checks.inputs.linked, faux_checks.gate.unmatched).

Generator: tests/_support.make_data (seed 0), a person key ``pid`` = 7000 + row; sex held in a separate frame.
"""

from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks.errors import ConfigurationError, InputError
from faux_checks.gate.attributes import check_attributes
from faux_checks.gate.policy import Policy
from faux_checks.gate.unmatched import check_linked_attributes, flagged_bound, link_audit_rows
from faux_checks.inputs.linked import check_key_not_input, join_protected
from faux_checks.inputs.tabular import FeatureSpec

import _support
from _support import FEATURES, UNFAIR

N = 400


def _policy(**section) -> Policy:
    payload = tomllib.loads(_support.POLICY.replace("epochs = 30", "epochs = 8"))
    payload["protected_file"] = {"join_on": "pid", **section}
    return Policy.model_validate(payload)


@pytest.fixture(scope="module")
def rows():
    data = _support.make_data(N, 0)
    data.insert(0, "pid", np.arange(7000, 7000 + N))
    protected = data[["pid", "sex"]].sample(frac=1.0, random_state=5).reset_index(drop=True)
    return data, data.drop(columns="sex"), protected


def test_join_puts_each_persons_c_on_their_row(rows):
    data, audit, protected = rows
    linked = join_protected(audit, protected.iloc[:-7], "pid", ["sex"])
    assert linked.n_rows == N and linked.n_unmatched == 7
    assert linked.unmatched_share == pytest.approx(7 / N)
    missing = set(protected["pid"].iloc[-7:])
    assert set(audit["pid"].iloc[linked.unmatched]) == missing
    assert "pid" not in linked.frame.columns
    expected = data.iloc[linked.matched].drop(columns="pid").reset_index(drop=True)
    pd.testing.assert_frame_equal(linked.frame[expected.columns], expected)


@pytest.mark.parametrize("change, words", [
    pytest.param(lambda a, p: (a.drop(columns="pid"), p), ["'pid' is not in the audit data"], id="key-not-in-audit"),
    pytest.param(lambda a, p: (a, p.rename(columns={"pid": "id"})), ["the protected file lacks ['pid']"], id="key-not-in-file"),
    pytest.param(lambda a, p: (a, p.drop(columns="sex")), ["the protected file lacks ['sex']"], id="c-not-in-file"),
    pytest.param(lambda a, p: (a.assign(sex="F"), p), ["holds the protected column(s) ['sex'] itself"], id="c-also-in-audit"),
    pytest.param(lambda a, p: (a, p.assign(pid=p["pid"].astype(str))), ["numeric (int64) in the audit data but text",
                                                              "write the key the same way"], id="key-dtype-mismatch"),
    pytest.param(lambda a, p: (a, pd.concat([p, p.head(4)])), ["4 'pid' keys occur more than once (8 rows", "remove the duplicates"], id="duplicate-keys"),
    pytest.param(lambda a, p: (a, p.assign(pid=p["pid"].where(p.index >= 2))), ["2 of 400 rows have no 'pid' key"], id="missing-keys"),
])
def test_join_errors_name_columns_counts_and_fix(rows, change, words):
    _, audit, protected = rows
    a, p = change(audit.copy(), protected.copy())
    with pytest.raises(ConfigurationError) as err:
        join_protected(a, p, "pid", ["sex"])
    for w in words:
        assert w in str(err.value)


def test_unmatched_policy_and_key_as_input(rows):
    _, audit, protected = rows
    with pytest.raises(ConfigurationError, match=r"7 of 400 audit rows \(1.75%\)"):
        link_audit_rows(audit, _policy(), protected_rows=protected.iloc[:-7])
    assert link_audit_rows(audit, _policy(unmatched="exclude"), protected_rows=protected.iloc[:-7]).n_unmatched == 7
    with pytest.raises(ConfigurationError, match="max_unmatched_share 1.00%"):
        link_audit_rows(audit, _policy(unmatched="exclude", max_unmatched_share=0.01), protected_rows=protected.iloc[:-7])
    spec = FeatureSpec.passthrough(audit, exclude=["y"])
    with pytest.raises(ConfigurationError, match="names the join key 'pid'"):
        check_key_not_input(spec, "pid")
    check_key_not_input(FeatureSpec.passthrough(audit, exclude=["y", "pid"]), "pid")


def test_flagged_bound_closed_form():
    assert flagged_bound(0.2, 0.3, 0.0) == (0.2, 0.3)
    lo, hi = flagged_bound(0.2, 0.3, 0.1)
    assert lo == pytest.approx(0.18) and hi == pytest.approx(0.37)
    assert flagged_bound(0.0, 1.0, 0.5) == (0.0, 1.0)


class Spy(torch.nn.Module):
    """The unfair linear target, recording every input matrix it is given."""

    def __init__(self):
        super().__init__()
        self.lin = _support.linear(UNFAIR)
        self.seen: list[torch.Tensor] = []

    def forward(self, x):
        self.seen.append(x.detach().clone())
        return self.lin(x)


def test_linked_route_scores_equal_c_joined_by_hand_and_c_never_an_input(rows):
    data, audit, protected = rows
    policy = _policy()
    spy = Spy()
    linked = check_linked_attributes(spy, audit, policy=policy, protected_rows=protected)
    by_hand = check_attributes(_support.linear(UNFAIR), data.drop(columns="pid"), policy=policy)
    np.testing.assert_array_equal(linked.sections[0].check.scores, by_hand.sections[0].check.scores)
    assert linked.decision == by_hand.decision == "failed"
    assert spy.seen
    sex = (data["sex"] == "M").to_numpy(dtype=np.float32)
    features = data[FEATURES].to_numpy(dtype=np.float32)
    for x in spy.seen:
        assert x.shape[1] == len(FEATURES)
        assert float(x.abs().max()) < 1000.0                    # the key (7000 + row) never reaches the target
        for j in range(x.shape[1]):
            column = x[:, j].numpy()
            if len(column) == N:
                assert not np.array_equal(column, sex)          # c (encoded) is not a column of the inputs
    full = [x.numpy() for x in spy.seen if len(x) == N]
    assert full                                                 # the target read every audit row at once
    np.testing.assert_allclose(full[0], features, rtol=1e-6)    # its inputs: the audit's features, in audit order
    rule = {r["rule"]: r for r in linked.rules}["protected_file"]
    assert rule["status"] == "ok" and "joined from a linked protected file by 'pid'" in rule["detail"]


def test_notebook_verb_takes_a_linked_file(rows, tmp_path):
    """faux_checks.check(..., protected_file=PATH, join_on=KEY): the same scores as the library route, one per audit
    row (indexed as the audit frame); join_on alone, without a file, is refused."""
    import faux_checks

    _, audit, protected = rows
    protected.to_csv(tmp_path / "protected.csv", index=False)
    policy = _policy()
    shown = faux_checks.check(_support.linear(UNFAIR), audit, policy=policy.with_overrides(protected_file=None),
                              protected_file=tmp_path / "protected.csv", join_on="pid")
    assert shown.decision == "failed"
    assert "protected_file" in set(shown.rules["rule"])
    library = check_linked_attributes(_support.linear(UNFAIR), audit, policy=policy, protected_rows=protected)
    np.testing.assert_array_equal(shown.scores["lic_score"].to_numpy(), library.sections[0].check.scores)
    assert list(shown.scores.index) == list(audit.index)
    with pytest.raises(InputError, match="needs both protected_file="):
        faux_checks.check(_support.linear(UNFAIR), audit, policy=policy.with_overrides(protected_file=None),
                          join_on="pid")


def test_registry_gate_rows_join_with_refuse_only(rows, tmp_path):
    """The registry gate (flows/gate.py, gate_plan) reads gate_rows: c joined on every row, exclude refused."""
    from faux_checks.gate.unmatched import gate_rows

    data, audit, protected = rows
    joined = gate_rows(audit, _policy(path="unused.csv").with_overrides(protected_file=None), audit_name="a")
    assert joined is audit                                      # no protected file: the data as read
    with pytest.raises(ConfigurationError, match="unmatched = \"refuse\" only"):
        gate_rows(audit, _policy(path="p.csv", unmatched="exclude"))
    with pytest.raises(ConfigurationError, match="protected file p.csv"):
        gate_rows(audit, _policy(path="p.csv"))                 # the file is read from the policy's path
    protected.to_csv(tmp_path / "p.csv", index=False)
    joined = gate_rows(audit, _policy(path=str(tmp_path / "p.csv")))
    pd.testing.assert_frame_equal(joined[data.drop(columns="pid").columns], data.drop(columns="pid"))
    protected.iloc[1:].to_csv(tmp_path / "p1.csv", index=False)
    with pytest.raises(ConfigurationError, match="1 of 400 audit rows"):
        gate_rows(audit, _policy(path=str(tmp_path / "p1.csv")))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exclude_bound_holds_the_all_rows_fraction(seed):
    """Ground truth: 5% of the keys missing from the protected file at random (seeds 0-2). The bound read on the
    matched rows, [l(1-u), h(1-u)+u], holds the flagged fraction the same check measures with every row's c known."""
    from faux_checks.gate.unmatched import flagged_bound

    data = _support.make_data(N, seed)
    data.insert(0, "pid", np.arange(N))
    target = _support.ProxyWhere(1.0, 0.0)                   # reads the proxy for about half the people only
    policy = _policy(unmatched="exclude")
    full = check_attributes(target, data.drop(columns="pid"), policy=policy).sections[0].check
    kept = data[["pid", "sex"]].sample(n=N - N // 20, random_state=seed)
    linked = check_linked_attributes(target, data.drop(columns="sex"), policy=policy, protected_rows=kept)
    matched = linked.sections[0].check
    lo, hi = flagged_bound(matched.interval.lower, matched.interval.upper, 0.05)
    assert lo <= full.flagged_fraction <= hi
    assert 0.2 < full.flagged_fraction < 0.8                 # a fraction the bound could miss on either side
    rule = {r["rule"]: r for r in linked.rules}["max_flagged_fraction"]
    assert rule["bound"] == pytest.approx([lo, hi])


def test_several_attributes_from_one_linked_file():
    """[[attributes]] sex and grp both read from the protected file; 10 of 400 rows unmatched and excluded: each
    attribute's max_flagged_fraction reads the bound with u = 2.5%, each section's scores cover the 400 audit rows."""
    data = _support.make_data(N, 0)
    data.insert(0, "pid", np.arange(N))
    data["grp"] = np.random.default_rng(0).choice(["a", "b"], N)
    payload = tomllib.loads(_support.POLICY.replace("epochs = 30", "epochs = 8").replace('protected = "sex"\n', ""))
    payload.update(attributes=[{"column": "sex"}, {"column": "grp"}],
                   protected_file={"join_on": "pid", "unmatched": "exclude"})
    policy = Policy.model_validate(payload)
    result = check_linked_attributes(_support.linear(_support.FAIR), data.drop(columns=["sex", "grp"]), policy=policy,
                                     protected_rows=data[["pid", "sex", "grp"]].iloc[:-10])
    rules = {r["rule"]: r for r in result.rules}
    assert {"sex/protected_file", "grp/protected_file"} <= set(rules)
    for section in result.sections:
        check = section.check
        assert len(check.scores) == N and np.isnan(check.scores[-10:]).all()
        assert rules[f"{section.attribute}/max_flagged_fraction"]["bound"] == pytest.approx(
            list(flagged_bound(check.interval.lower, check.interval.upper, 10 / N)))
    assert result.decision == "passed"                       # the fair target: upper end 3.4% < limit 10%
