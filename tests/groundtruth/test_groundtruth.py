"""Ground-truth generators: proxy injection and the definitional counterfactual, against direct computations."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from faux_checks.errors import InputError
from faux_checks.groundtruth.definitional import (
    ADULT_LINKS,
    definitional_counterfactual,
    definitional_fairness_scores,
    linked_rows,
)
from faux_checks.groundtruth.proxy import PROXY_COLUMNS, make_proxy_data, proxy_fairness_scores


def _rows(n=400, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"score": rng.normal(size=n), "region": rng.choice(["N", "S", "E"], n),
                          "gpa": rng.normal(3.0, 0.4, n)})
    y = (frame["score"] + rng.normal(size=n) > 0).astype(int).to_numpy()
    return frame, y


@pytest.mark.parametrize("kind", ["binary", "multiclass", "continuous"])
def test_counterfactual_regenerates_the_proxies_with_the_same_noise(kind):
    frame, y = _rows()
    data = make_proxy_data(frame, y, legit_column="gpa", kind=kind, bias=0.5, seed=3)
    pd.testing.assert_frame_equal(data.frame(data.c), data.frame())
    assert list(data.frame().columns) == ["score", "region", *PROXY_COLUMNS]
    assert data.admissible_columns == ["score", "region"]
    for c2 in data.counterfactual_protected():
        other = data.frame(c2)
        pd.testing.assert_frame_equal(other[["score", "region"]], data.frame()[["score", "region"]])
    expected = 2 if kind == "continuous" else (1 if kind == "binary" else 2)
    assert len(data.counterfactual_protected()) == expected


def test_linear_proxy_moves_by_its_strength_times_the_embedding_change():
    frame, y = _rows()
    data = make_proxy_data(frame, y, legit_column="gpa", kind="binary", seed=0, strength={"linear": 0.5})
    moved = data.proxies(1 - data.c)["proxy_linear"] - data.proxies()["proxy_linear"]
    np.testing.assert_allclose(moved, 0.5 * 2 * (1 - 2 * data.c), atol=1e-12)   # e = 2c − 1 changes by ∓2


def test_ifs_of_a_target_that_ignores_the_proxies_is_exactly_zero():
    frame, y = _rows()
    data = make_proxy_data(frame, y, legit_column="gpa", kind="multiclass", seed=1)
    ifs = proxy_fairness_scores(lambda f: expit(f["score"].to_numpy()), data)
    assert np.all(ifs == 0.0)


def test_ifs_matches_a_direct_computation():
    frame, y = _rows()
    data = make_proxy_data(frame, y, legit_column="gpa", kind="continuous", seed=2)
    def predict(f):
        return expit(2.0 * f["proxy_linear"].to_numpy() + f["score"].to_numpy())

    ifs = proxy_fairness_scores(predict, data)
    s = data.strength["linear"]
    base = 2.0 * (s * data.c + data.noise["linear"]) + frame["score"].to_numpy()
    direct = np.maximum(np.abs(expit(base + 2.0 * s) - expit(base)), np.abs(expit(base - 2.0 * s) - expit(base)))
    np.testing.assert_allclose(ifs, direct, rtol=1e-12)


def test_label_bias_only_suppresses_favourable_labels_of_the_disadvantaged():
    frame, y = _rows(n=4000)
    data = make_proxy_data(frame, y, legit_column="gpa", kind="binary", bias=1.0, seed=0)
    assert np.all(data.y <= data.y_recorded)
    assert np.all(data.y[data.c == 0] == data.y_recorded[data.c == 0])
    assert data.y[data.c == 1].sum() == 0                                       # bias 1: every positive of group 1
    unbiased = make_proxy_data(frame, y, legit_column="gpa", kind="binary", bias=0.0, seed=0)
    np.testing.assert_array_equal(unbiased.y, unbiased.y_recorded)


def test_proxy_data_errors_name_the_problem():
    frame, y = _rows()
    with pytest.raises(InputError, match="legit_column 'nope'"):
        make_proxy_data(frame, y, legit_column="nope")
    with pytest.raises(InputError, match=r"unknown strength keys \['lin'\]"):
        make_proxy_data(frame, y, legit_column="gpa", strength={"lin": 1.0})
    with pytest.raises(InputError, match="bias must be in"):
        make_proxy_data(frame, y, legit_column="gpa", bias=1.5)


def _adult_rows():
    return pd.DataFrame({
        "sex": ["Male", "Female", "Male", "Female", "Male"],
        "relationship": ["Husband", "Wife", "Not-in-family", "Unmarried", "Wife"],
        "age": [40, 38, 25, 30, 50],
    })


def test_definitional_counterfactual_flips_sex_and_maps_husband_and_wife():
    rows = _adult_rows()
    cf = definitional_counterfactual(rows)
    assert cf["sex"].tolist() == ["Female", "Male", "Female", "Male", "Female"]
    # a man recorded as "Wife" (inconsistent) keeps his value: only the value tied to his own group maps
    assert cf["relationship"].tolist() == ["Wife", "Husband", "Not-in-family", "Unmarried", "Wife"]
    assert rows["sex"].tolist()[0] == "Male"                                    # the input is not modified
    assert linked_rows(rows).tolist() == [True, True, False, False, True]


def test_definitional_scores_of_a_sex_blind_model_are_zero_off_the_linked_rows():
    rows = _adult_rows()
    def predict(f):
        return np.where(f["relationship"] == "Husband", 0.7, 0.2) + 0.001 * f["age"].to_numpy()

    scores = definitional_fairness_scores(predict, rows)
    np.testing.assert_allclose(scores, [0.5, 0.5, 0.0, 0.0, 0.0], atol=1e-12)
    assert ADULT_LINKS == {"relationship": {"Male": "Husband", "Female": "Wife"}}


def test_definitional_counterfactual_needs_the_two_linked_groups():
    rows = _adult_rows()
    rows.loc[0, "sex"] = "Other"
    with pytest.raises(InputError, match="binary protected attribute"):
        definitional_counterfactual(rows)
