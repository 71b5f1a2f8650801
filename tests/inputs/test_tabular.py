"""FeatureSpec (faux_checks.inputs.tabular): encoding values, JSON round trip, infrequent levels, errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from faux_checks import FeatureSpec, InputError
from faux_checks.inputs.tabular import INFREQUENT


@pytest.fixture
def frame():
    return pd.DataFrame({
        "age": [20.0, 30.0, 40.0, 50.0, 60.0, 30.0],
        "job": ["a", "b", "a", "c", "a", "b"],
        "owner": [True, False, True, True, False, True],
        "code": [1, 2, 1, 2, 1, 1],
        "const": [7.0] * 6,
        "unused": ["x"] * 6,
    })


def test_encode_values(frame):
    spec = FeatureSpec.fit(frame, ["age", "job", "owner", "code", "const"], categorical=["code"], name="t")
    assert spec.feature_names == ["age", "job=a", "job=b", "job=c", "owner=False", "owner=True",
                                  "code=1", "code=2", "const"]
    assert spec.n_features == 9 and spec.source_columns == ["age", "job", "owner", "code", "const"]
    X = spec.encode(frame)
    assert X.dtype == np.float32 and X.shape == (6, 9)
    age = frame["age"].to_numpy()
    np.testing.assert_allclose(X[:, 0], (age - age.mean()) / age.std(), rtol=1e-6)   # population std
    np.testing.assert_array_equal(X[:, 1:4], [[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(X[:, 4:6].argmax(1), frame["owner"].astype(int).to_numpy())
    np.testing.assert_array_equal(X[:, 6:8].argmax(1), frame["code"].to_numpy() - 1)
    np.testing.assert_array_equal(X[:, 8], np.zeros(6))                 # constant: centred only, no NaN
    assert spec.constant_columns() == ["const"]
    # every one-hot group has exactly one 1 per row
    np.testing.assert_array_equal(spec.aggregate(X)[:, 1:4], np.ones((6, 3)))


def test_json_round_trip_is_equal(frame, tmp_path):
    spec = FeatureSpec.fit(frame, ["age", "job", "owner", "code"], categorical=["code"], min_frequency=2, name="t")
    payload = json.loads(json.dumps(spec.to_dict()))
    again = FeatureSpec.from_dict(payload)
    assert again == spec
    np.testing.assert_array_equal(again.encode(frame), spec.encode(frame))
    path = spec.save(tmp_path / "spec.json")
    loaded = FeatureSpec.load(path)
    assert loaded == spec and loaded.feature_names == spec.feature_names
    np.testing.assert_array_equal(loaded.encode(frame), spec.encode(frame))


def test_save_never_overwrites(frame, tmp_path):
    spec = FeatureSpec.fit(frame, ["age"])
    path = tmp_path / "spec.json"
    path.write_text("keep me")
    with pytest.raises(InputError, match="exists already"):
        spec.save(path)
    assert path.read_text() == "keep me"


def test_load_errors(tmp_path):
    with pytest.raises(InputError, match="cannot read feature spec"):
        FeatureSpec.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="cannot read feature spec"):
        FeatureSpec.load(bad)
    with pytest.raises(InputError, match="schema_version 99 is not supported"):
        FeatureSpec.from_dict({"schema_version": 99, "columns": []})


def test_infrequent_levels_are_grouped(rng):
    jobs = ["a"] * 50 + ["b"] * 30 + ["c"] * 3 + ["d"] * 2
    df = pd.DataFrame({"job": jobs})
    spec = FeatureSpec.fit(df, ["job"], min_frequency=5)
    assert spec.columns[0].levels == ("a", "b", INFREQUENT)
    X = spec.encode(df)
    np.testing.assert_array_equal(X.sum(0), [50, 30, 5])
    # share form: 0.1 of 85 rows = 8.5 rows
    assert FeatureSpec.fit(df, ["job"], min_frequency=0.1).columns[0].levels == ("a", "b", INFREQUENT)
    assert FeatureSpec.fit(df, ["job"], min_frequency=0.5).columns[0].levels == ("a", INFREQUENT)
    # no level below the threshold: no infrequent level
    assert FeatureSpec.fit(df, ["job"], min_frequency=2).columns[0].levels == ("a", "b", "c", "d")
    # an unseen category joins the infrequent level
    new = spec.encode(pd.DataFrame({"job": ["a", "zzz", "c"]}))
    np.testing.assert_array_equal(new, [[1, 0, 0], [0, 0, 1], [0, 0, 1]])


@pytest.mark.parametrize("min_frequency,levels,index", [
    (0, ("1", "2", "3"), [0, 1, 0, 2, 1, 0, 2, 0]),
    (3, ("1", INFREQUENT), [0, 1, 0, 1, 1, 0, 1, 0]),
])
def test_integer_codes_read_back_as_floats_keep_their_levels(min_frequency, levels, index):
    """Fit on int codes, encode the same codes as floats (e.g. a CSV column with a blank elsewhere).

    '1.0' and '1' are one level: read as different strings, every row would be unseen (an error, or with
    min_frequency every row silently '__infrequent__').
    """
    fit = pd.DataFrame({"code": [1, 2, 1, 3, 2, 1, 3, 1]})
    spec = FeatureSpec.fit(fit, ["code"], categorical=["code"], min_frequency=min_frequency)
    assert spec.columns[0].levels == levels
    np.testing.assert_array_equal(spec.encode(fit).argmax(1), index)
    np.testing.assert_array_equal(spec.encode(fit.astype({"code": float})).argmax(1), index)
    # non-integral floats are their own levels
    halves = FeatureSpec.fit(pd.DataFrame({"r": [0.5, 1.0, 0.5]}), ["r"], categorical=["r"])
    assert halves.columns[0].levels == ("0.5", "1")


def test_unseen_category_without_infrequent_level_is_an_error():
    spec = FeatureSpec.fit(pd.DataFrame({"job": ["a", "b", "a"]}), ["job"])
    with pytest.raises(InputError, match=r"column 'job' has 2 rows with categories unseen at fit time \(e.g. \['q', 'z'\]\)"):
        spec.encode(pd.DataFrame({"job": ["a", "z", "q"]}))


def test_missing_values_name_the_column_and_count(frame):
    spec = FeatureSpec.fit(frame, ["age", "job"])
    holes = frame.copy()
    holes.loc[[1, 3], "job"] = None
    holes.loc[[0, 2, 4], "age"] = np.nan
    with pytest.raises(InputError, match="column 'age' has 3 missing values in 6 rows"):
        spec.encode(holes)
    with pytest.raises(InputError, match="column 'job' has 2 missing values in 6 rows"):
        spec.encode(holes[["job"]].assign(age=1.0))
    with pytest.raises(InputError, match="column 'job' has 2 missing values in 6 rows"):
        FeatureSpec.fit(holes, ["job"])
    empty = frame.assign(blank=np.nan)
    with pytest.raises(InputError, match="column 'blank' is entirely empty"):
        FeatureSpec.fit(empty, ["age", "blank"])


def test_bad_columns_and_values(frame):
    spec = FeatureSpec.fit(frame, ["age", "job"], name="adult-v3")
    with pytest.raises(InputError, match=r"column\(s\) \['job'\] not found .* present columns: \[age\]"):
        spec.encode(frame[["age"]])
    with pytest.raises(InputError, match=r"numeric column 'age' has 1 non-numeric values in 6 rows \(e.g. 'old'\)"):
        spec.encode(frame.astype({"age": object}).assign(age=[20, 30, "old", 50, 60, 30]))
    with pytest.raises(InputError, match="0 rows"):
        FeatureSpec.fit(frame.iloc[:0], ["age"])
    with pytest.raises(InputError, match="not found"):
        FeatureSpec.fit(frame, ["salary"])


def test_aggregate_sums_one_hot_groups(frame):
    spec = FeatureSpec.fit(frame, ["age", "job", "owner"])
    per_feature = np.arange(12.0).reshape(2, 6)          # age | job=a,b,c | owner=False,True
    np.testing.assert_array_equal(spec.aggregate(per_feature), [[0, 1 + 2 + 3, 4 + 5], [6, 7 + 8 + 9, 10 + 11]])
    np.testing.assert_array_equal(spec.feature_to_column(), [0, 1, 1, 1, 2, 2])
    np.testing.assert_array_equal(spec.feature_mask("job"), [False, True, True, True, False, False])
    assert not spec.feature_mask("nope").any()
    with pytest.raises(InputError, match=r"expected an array of shape \(n, 6\), got \(2, 5\)"):
        spec.aggregate(per_feature[:, :5])


def test_passthrough_keeps_numeric_columns_unscaled(frame):
    spec = FeatureSpec.passthrough(frame, exclude=["code"])
    assert spec.source_columns == ["age", "const"]
    np.testing.assert_array_equal(spec.encode(frame), frame[["age", "const"]].to_numpy(np.float32))
    with pytest.raises(InputError, match="no numeric feature columns left"):
        FeatureSpec.passthrough(frame[["job", "owner"]])
