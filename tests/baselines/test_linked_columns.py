"""The linked-columns tester on hand-made frames."""

import numpy as np
import pandas as pd
import pytest

from faux_checks.baselines.linked_columns import LinkedColumnsTester, check_links, linked_counterfactual
from faux_checks.errors import InputError

LINKS = {"relationship": {"Male": "Husband", "Female": "Wife"}}


def _frame():
    return pd.DataFrame({"sex": ["Male", "Female", "Female", "Male"],
                         "relationship": ["Husband", "Wife", "Own-child", "Not-in-family"],
                         "hours": [40.0, 30.0, 20.0, 45.0]})


def _predict_sex_blind(frame):
    # P(y) = 0.2 + 0.5·[Husband] + 0.1·[Wife] + 0.001·hours
    rel = frame["relationship"].to_numpy()
    return 0.2 + 0.5 * (rel == "Husband") + 0.1 * (rel == "Wife") + 0.001 * frame["hours"].to_numpy()


def test_scores_are_the_exact_change_under_the_mapping():
    frame = _frame()
    values = np.array([1, 0, 0, 1])                                  # groups ("Female", "Male")
    tester = LinkedColumnsTester(_predict_sex_blind, protected="sex", links=LINKS, groups=("Female", "Male"))
    np.testing.assert_allclose(tester.score(frame, values), [0.4, 0.4, 0.0, 0.0], atol=1e-12)


def test_protected_input_adds_the_direct_effect():
    frame = _frame()
    def predict(f):
        return _predict_sex_blind(f) + 0.05 * (f["sex"].to_numpy() == "Male")

    tester = LinkedColumnsTester(predict, protected="sex", links=LINKS, groups=("Female", "Male"))
    np.testing.assert_allclose(tester.score(frame, np.array([1, 0, 0, 1])), [0.45, 0.45, 0.05, 0.05], atol=1e-12)


def test_multiclass_takes_the_largest_change_over_the_other_groups():
    frame = pd.DataFrame({"g": ["a", "b", "c"], "title": ["Mr", "Ms", "Mx"]})
    links = {"title": {"a": "Mr", "b": "Ms", "c": "Mx"}}
    def predict(f):
        return f["title"].map({"Mr": 0.9, "Ms": 0.5, "Mx": 0.6}).to_numpy()

    tester = LinkedColumnsTester(predict, protected="g", links=links, groups=("a", "b", "c"))
    np.testing.assert_allclose(tester.score(frame, np.array([0, 1, 2])), [0.4, 0.4, 0.3], atol=1e-12)


def test_counterfactual_leaves_the_input_alone():
    frame = _frame()
    cf = linked_counterfactual(frame, protected="sex", groups=frame["sex"].to_numpy(),
                               to_groups=np.where(frame["sex"] == "Male", "Female", "Male"), links=LINKS)
    assert frame["relationship"].tolist()[0] == "Husband"
    assert cf["relationship"].tolist() == ["Wife", "Husband", "Own-child", "Not-in-family"]
    assert cf["sex"].tolist() == ["Female", "Male", "Male", "Female"]


def test_bad_links_are_named():
    with pytest.raises(InputError, match="linked column 'rel' is not in the data"):
        check_links({"rel": {"Male": "Husband"}}, columns=["sex", "relationship"], groups=("Female", "Male"))
    with pytest.raises(InputError, match=r"names groups \['M'\]"):
        check_links({"relationship": {"M": "Husband"}}, columns=["relationship"], groups=("Female", "Male"))
    with pytest.raises(InputError, match=r"values \['Hubsand'\]"):
        check_links({"relationship": {"Male": "Hubsand"}}, columns=["relationship"], groups=("Female", "Male"),
                    levels={"relationship": ("Husband", "Wife")})
    with pytest.raises(InputError, match="no linked columns declared"):
        check_links({}, columns=["relationship"], groups=("Female", "Male"))
