"""The protected attribute (faux_checks.inputs.protected): C01, C02, C08 and the kind rules."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from faux_checks import AuxiliaryModel, FAuxTester, InputError, TargetOutput, encode_protected


@pytest.fixture
def sex(rng):
    """200 labels "F"/"M" (not sorted, both groups present)."""
    return np.where(rng.random(200) < 0.4, "F", "M")


def _encodings(sex: np.ndarray) -> dict:
    is_m = sex == "M"
    return {
        "strings": pd.Series(sex, name="sex"),
        "string_list": list(sex),
        "booleans": pd.Series(is_m, name="sex"),
        "ints": pd.Series(is_m.astype(int), name="sex"),
        "floats": pd.Series(is_m.astype(float), name="sex"),
        "categorical": pd.Series(pd.Categorical(sex), name="sex"),
        "one_hot": pd.DataFrame({"sex=F": (~is_m).astype(int), "sex=M": is_m.astype(int)}),
        "one_hot_bool": pd.DataFrame({"sex=F": ~is_m, "sex=M": is_m}),
        "nullable_int": pd.Series(is_m.astype(int), dtype="Int64", name="sex"),
        "nullable_bool": pd.Series(is_m, dtype="boolean", name="sex"),
    }


EXPECTED_GROUPS = {
    "strings": ("F", "M"), "string_list": ("F", "M"), "booleans": ("False", "True"), "ints": ("0", "1"),
    "floats": ("0", "1"), "categorical": ("F", "M"), "one_hot": ("sex=F", "sex=M"),
    "one_hot_bool": ("sex=F", "sex=M"), "nullable_int": ("0", "1"), "nullable_bool": ("False", "True"),
}


# ---------------------------------------------------------------------------- C08
def test_every_encoding_gives_the_same_groups(sex):
    expected_codes = (sex == "M").astype(np.int64)
    for label, values in _encodings(sex).items():
        pa = encode_protected(values)
        assert pa.kind == "binary", label
        assert pa.groups == EXPECTED_GROUPS[label], label
        np.testing.assert_array_equal(pa.values, expected_codes, err_msg=label)
        assert pa.values.dtype == np.int64
        assert pa.kept.all() and pa.n_missing == 0
        assert pa.n_outputs == 1
    # group labels map back to the original values
    pa = encode_protected(pd.Series(sex, name="sex"))
    np.testing.assert_array_equal(pa.group_labels(), sex)


def test_categorical_keeps_its_declared_order_but_the_same_partition(sex):
    pa = encode_protected(pd.Series(pd.Categorical(sex, categories=["M", "F"]), name="sex"))
    assert pa.groups == ("M", "F")
    np.testing.assert_array_equal(pa.values, (sex == "F").astype(np.int64))
    # an unused category is not a group
    pa3 = encode_protected(pd.Series(pd.Categorical(sex, categories=["F", "M", "X"])))
    assert pa3.groups == ("F", "M") and pa3.kind == "binary"


def test_every_encoding_gives_the_same_aux_scores(sex, rng):
    """Same partition and the same seed: identical aux models, identical fAux scores."""
    n = len(sex)
    is_m = (sex == "M").astype(np.float32)
    X = np.column_stack([rng.normal(size=n), is_m + 0.5 * rng.normal(size=n), rng.normal(size=n)]).astype(np.float32)
    import torch

    target = torch.nn.Linear(3, 1)
    scores = {}
    encodings = _encodings(sex)
    for label in ("strings", "booleans", "ints", "categorical", "one_hot"):
        pa = encode_protected(encodings[label])
        aux = AuxiliaryModel(hidden=(8,), epochs=3, seed=3).fit(X, pa.values, groups=pa.groups)
        scores[label] = FAuxTester(target, aux, output=TargetOutput("logit")).score(X)
    reference = scores["strings"]
    assert np.isfinite(reference).all() and reference.std() > 0
    for label, s in scores.items():
        np.testing.assert_array_equal(s, reference, err_msg=label)


# ---------------------------------------------------------------------------- C01: missing values
def _with_missing(sex, missing_value):
    values = sex.astype(object)
    values[[3, 17, 50, 51, 120, 199]] = missing_value
    return values


@pytest.mark.parametrize("missing_value", [None, np.nan])
def test_missing_values_raise_the_same_error_for_every_container(sex, missing_value):
    values = _with_missing(sex, missing_value)
    containers = {
        "series": pd.Series(values, name="sex"),
        "object_array": values,
        "list": list(values),
    }
    messages = []
    for label, container in containers.items():
        with pytest.raises(InputError) as info:
            encode_protected(container, name="sex")
        msg = str(info.value)
        assert "'sex'" in msg and "6 missing values in 200 rows" in msg, label
        assert 'missing_protected = "drop"' in msg, label             # the options name the policy key
        messages.append(msg)
    assert len(set(messages)) == 1


def test_unknown_missing_option_is_refused_not_treated_as_drop(sex):
    with pytest.raises(InputError, match="missing must be 'error' or 'drop', got 'dorp'"):
        encode_protected(_with_missing(sex, None), name="sex", missing="dorp")


def test_missing_drop_excludes_and_counts_the_rows(sex):
    values = _with_missing(sex, None)
    results = [encode_protected(c, name="sex", missing="drop")
               for c in (pd.Series(values, name="sex"), values, list(values))]
    keep = np.ones(200, dtype=bool)
    keep[[3, 17, 50, 51, 120, 199]] = False
    for pa in results:
        assert pa.n_missing == 6
        np.testing.assert_array_equal(pa.kept, keep)
        assert len(pa.values) == 194
        np.testing.assert_array_equal(pa.group_labels(), sex[keep])   # missing never joins a group
        assert pa.groups == ("F", "M")


# ---------------------------------------------------------------------------- C02: nullable dtypes
@pytest.mark.parametrize(
    "series,groups",
    [
        (pd.Series([0, 1, pd.NA, 1, 0, pd.NA, 1], dtype="Int64", name="grp"), ("0", "1")),
        (pd.Series([True, False, pd.NA, True, False, pd.NA, True], dtype="boolean", name="grp"), ("False", "True")),
    ],
)
def test_nullable_dtypes_with_na(series, groups):
    with pytest.raises(InputError, match="'grp' has 2 missing values in 7 rows"):
        encode_protected(series)
    pa = encode_protected(series, missing="drop")
    assert pa.groups == groups and pa.n_missing == 2
    assert pa.kept.tolist() == [True, True, False, True, True, False, True]
    assert pa.values.tolist() == ([0, 1, 1, 0, 1] if groups == ("0", "1") else [1, 0, 1, 0, 1])
    # everything a report needs serialises to JSON (plain Python types)
    payload = json.dumps({"n_missing": pa.n_missing, "groups": pa.groups, "n_kept": int(pa.kept.sum())})
    assert json.loads(payload) == {"n_missing": 2, "groups": list(groups), "n_kept": 5}


# ---------------------------------------------------------------------------- kinds and errors
def test_multiclass_and_continuous_inference(rng):
    race = pd.Series(rng.choice(["a", "b", "c"], size=90), name="race")
    pa = encode_protected(race)
    assert pa.kind == "multiclass" and pa.groups == ("a", "b", "c") and pa.n_outputs == 3
    np.testing.assert_array_equal(np.asarray(pa.groups, dtype=object)[pa.values], race.to_numpy())

    age = pd.Series(rng.uniform(18, 90, size=100), name="age")
    cont = encode_protected(age)
    assert cont.kind == "continuous" and cont.groups == () and cont.n_outputs == 1
    np.testing.assert_array_equal(cont.values, age.to_numpy())
    assert len(set(cont.group_labels())) == 4                          # quartile bins for reports
    # integral floats and ints give the same labels
    assert encode_protected([0.0, 1.0, 2.0, 1.0]).groups == encode_protected([0, 1, 2, 1]).groups == ("0", "1", "2")
    assert encode_protected(pd.Series([0.0, 1.0, 2.0, 1.0])).groups == ("0", "1", "2")
    mixed = encode_protected(np.array([1, 1.0, 0, np.int64(0), 1], dtype=object))   # 1 and 1.0: one group
    assert mixed.groups == ("0", "1") and mixed.values.tolist() == [1, 1, 0, 0, 1]
    assert encode_protected([10, 2, 10, 2]).groups == ("2", "10")                  # numeric order
    assert encode_protected(["10", "2", "10", "2"]).groups == ("10", "2")          # strings: as strings


def test_protected_errors(rng):
    with pytest.raises(InputError, match="single group"):
        encode_protected(["F"] * 10, name="sex")
    with pytest.raises(InputError, match="declared binary but has 3 groups"):
        encode_protected(["a", "b", "c", "a"], kind="binary")
    with pytest.raises(InputError, match="declared continuous but is not numeric"):
        encode_protected(["a", "b", "c", "a"], kind="continuous")
    with pytest.raises(InputError, match="is constant"):
        encode_protected([2.0] * 5, kind="continuous")
    with pytest.raises(InputError, match="25 groups"):
        encode_protected(list(range(25)) * 2, name="zip")
    with pytest.raises(InputError, match="no non-missing values"):
        encode_protected([None, None], missing="drop")
    bad = pd.DataFrame({"a": [1, 0, 1, 0], "b": [0, 1, 1, 0]})
    with pytest.raises(InputError, match="2 of 4 rows .* do not hold exactly one 1"):
        encode_protected(bad)
    with pytest.raises(InputError, match="declared multiclass but has 2 one-hot columns"):
        encode_protected(pd.DataFrame({"a": [1, 0], "b": [0, 1]}), kind="multiclass")


def test_one_hot_with_missing_rows():
    frame = pd.DataFrame({"g=a": [1, 0, np.nan, 0, 1], "g=b": [0, 1, np.nan, 1, 0]})
    with pytest.raises(InputError, match="1 rows with missing values in 5 rows"):
        encode_protected(frame, name="g")
    pa = encode_protected(frame, name="g", missing="drop")
    assert pa.n_missing == 1 and pa.kept.tolist() == [True, True, False, True, True]
    assert pa.values.tolist() == [0, 1, 1, 0] and pa.groups == ("g=a", "g=b")
