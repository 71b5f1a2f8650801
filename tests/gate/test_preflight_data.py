"""The audit data judged with the policy alone (faux_checks.gate.preflight_data): counts read back exactly,
every offending column named, rows needed from closed forms."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from faux_checks.errors import ConfigurationError


def _lending(n: int = 2000, minority: int = 280, seed: int = 0) -> pd.DataFrame:
    """``race`` with exactly ``minority`` 'black' rows, a yes/no ``deny`` label, two numeric inputs, one text input."""
    rng = np.random.default_rng(seed)
    race = np.array(["black"] * minority + ["white"] * (n - minority), dtype=object)
    return pd.DataFrame({"race": race, "income": rng.normal(size=n), "debt": rng.normal(size=n),
                         "purpose": rng.choice(["car", "home"], n), "deny": rng.choice(["yes", "no"], n)})


def _policy(tmp_path, admissible: str = "", **top):
    """The shipped policy's faux limits with ``race``/``deny`` (and ``admissible`` columns, a TOML list)."""
    from faux_checks.gate.policy import load_policy

    if not admissible:
        return load_policy(None, protected="race", label="deny", **top)
    (tmp_path / "p.toml").write_text(f'protected = "race"\nlabel = "deny"\n[faux]\ndelta = 0.1\n'
                                     f'max_flagged_fraction = 0.05\nadmissible = {admissible}\n')
    return load_policy(tmp_path / "p.toml")


def test_findings_count_every_column_and_group(tmp_path):
    from faux_checks.gate.preflight_data import finding_lines, inspect_data

    frame = _lending()
    frame.loc[:14, "income"] = np.nan            # 15 missing
    frame.loc[100:102, "debt"] = np.nan          # 3 missing
    policy = _policy(tmp_path, positive_label="yes")
    found = inspect_data(frame, policy, name="lend.csv")
    assert found.problems == []                  # inputs' missing values are a finding: the model's rule judges them
    assert found.missing == {"income": 15, "debt": 3}
    assert found.column_types == {"race": "text", "income": "number", "debt": "number", "purpose": "text",
                                  "deny": "text"}
    (groups,) = found.groups
    assert (groups.column, groups.kind, groups.counts, groups.missing) == ("race", "binary",
                                                                           {"black": 280, "white": 1720}, 0)
    # group minimum: 100 audited and 100 held-out rows (aux.holdout 0.2) at a 14% share: 100 / (0.14 · 0.2)
    assert found.rows_needed["group minimum"] == math.ceil(100 * 2000 / (280 * 0.2)) == 3572
    lines = finding_lines(found, policy)
    assert lines[:4] == [
        "data lend.csv: 2,000 rows, 5 columns (3 text, 2 number)",
        "  missing values in 2 column(s): 'income' 15, 'debt' 3 (judged per model version: a target model that cannot "
        "take them in its input columns is refused)",
        "  protected attribute 'race': black 280 (14.0%), white 1,720 (86.0%); decision.min_group_rows 100 audited "
        "and held-out rows (aux.holdout 0.2 of the audited rows)",
        "  rows needed at these group shares: 3,572 for the group minimum"]


def test_every_model_independent_problem_is_named_in_one_line(tmp_path):
    from faux_checks.gate.preflight_data import check_data, inspect_data

    frame = _lending()
    frame.loc[[3, 9], "race"] = np.nan
    frame.loc[:6, "income"] = np.nan
    policy = _policy(tmp_path, admissible='["income"]')     # admissible: an input of every target
    found = inspect_data(frame, policy, name="lend.csv")
    with pytest.raises(ConfigurationError) as info:
        check_data(found, policy_name="the policy p.toml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("lend.csv (2,000 rows) does not fit the policy p.toml: 3 problem(s): (1) the label "
                              "column 'deny' holds text")
    assert "(2) protected attribute 'race' has 2 missing values in 2,000 rows" in message
    # the protected attribute's 2 missing rows are dropped by a check, so income counts 6 of its 7 there (row 3)
    assert ("(3) missing values in 1 input column(s): 'income' (6 of 1,998 rows); drop or impute them before the "
            "check (the policy's admissible and linked columns are inputs of every target model)") in message
    assert message.endswith("; no model was downloaded and nothing was recorded")


def test_missing_value_rule_names_every_input_column():
    from faux_checks.gate.preflight_data import missing_value_refusal

    missing = {"a": 15, "b": 3, "unused": 7}
    assert missing_value_refusal(missing, ["b", "c", "a"], rows=2400) == (
        "missing values in 2 input column(s): 'b' (3 of 2,400 rows), 'a' (15 of 2,400 rows); drop or impute them "
        "before the check")
    assert missing_value_refusal(missing, ["c"], rows=2400) is None


def test_group_rows_needed_closed_form():
    from faux_checks.gate.preflight_data import group_rows_needed

    assert group_rows_needed({"a": 50, "b": 150}, 100, 1.0) == 400         # a: 25% of the rows, 100 / 0.25
    assert group_rows_needed({"a": 50, "b": 150}, 100, 0.2) == 2000        # and 100 held-out at 20%
    assert group_rows_needed({}, 100, 0.2) is None


def test_rows_needed_for_the_flagged_fraction_clears_the_limit(tmp_path):
    """At the estimate the Clopper-Pearson interval clears the limit; at a tenth of it, it does not."""
    from faux_checks.gate.bounds import clopper_pearson
    from faux_checks.gate.preflight_data import inspect_data

    policy = _policy(tmp_path, positive_label="yes")
    need = inspect_data(_lending(), policy, name="d").rows_needed
    limit = policy.faux.max_flagged_fraction
    m = need["pass at half the limit"]
    assert clopper_pearson(round(limit / 2 * m), m, 0.95)[1] <= limit
    assert clopper_pearson(round(limit / 2 * m // 10), m // 10, 0.95)[1] > limit
    m = need["fail at twice the limit"]
    assert clopper_pearson(round(2 * limit * m), m, 0.95)[0] > limit
