"""FeatureSpec.from_column_transformer: a fitted scikit-learn ColumnTransformer becomes the feature spec."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler

from faux_checks import FeatureSpec, InputError, from_column_transformer
from faux_checks.inputs.tabular import INFREQUENT


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    n = 200
    return pd.DataFrame({
        "age": rng.normal(40, 12, n),
        "hours": rng.integers(10, 60, n),
        "job": rng.choice(["clerk", "nurse", "pilot", "rare"], n, p=[0.45, 0.35, 0.18, 0.02]),
        "code": rng.choice([1, 2, 3], n),
        "const": np.full(n, 3.5),
        "income": rng.normal(50, 5, n),
        "sex": rng.choice(["F", "M"], n),
    })


def _dense(m):
    return m.toarray() if sparse.issparse(m) else np.asarray(m, dtype=np.float64)


def _same(spec, ct, frame):
    expected = _dense(ct.transform(frame))
    got = spec.transform(frame)
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(spec.encode(frame), expected.astype(np.float32))


def test_scaler_one_hot_passthrough_drop_reproduce_the_matrix(frame, tmp_path):
    ct = ColumnTransformer([
        ("num", StandardScaler(), ["age", "hours", "const"]),
        ("cat", OneHotEncoder(), ["job", "code"]),
        ("gone", "drop", ["sex"]),
    ], remainder="passthrough").fit(frame)
    spec = from_column_transformer(ct, name="team")
    assert spec.source_columns == ["age", "hours", "const", "job", "code", "income"]
    assert spec.feature_names == ["age", "hours", "const", "job=clerk", "job=nurse", "job=pilot", "job=rare",
                                  "code=1", "code=2", "code=3", "income"]
    assert spec.n_features == len(ct.get_feature_names_out()) == 11
    assert spec.constant_columns() == ["const"]
    _same(spec, ct, frame)
    _same(spec, ct, frame.iloc[::-7])          # other rows, other order: the fitted state, not the data
    again = FeatureSpec.load(spec.save(tmp_path / "spec.json"))   # survives the JSON file the gate reads
    assert again == spec
    _same(again, ct, frame.iloc[:50])
    # the standardisation is scikit-learn's: population std, mean of the fit rows
    age = frame["age"].to_numpy()
    assert spec.columns[0].mean == pytest.approx(age.mean(), abs=1e-12)
    assert spec.columns[0].std == pytest.approx(age.std(), abs=1e-12)


def test_selectors_indices_pipelines_and_scaler_options(frame):
    ct = ColumnTransformer([
        ("num", make_pipeline("passthrough", StandardScaler(with_mean=False)), make_column_selector(dtype_include="float")),
        ("ints", StandardScaler(with_std=False), [1]),
        ("cat", make_pipeline(OneHotEncoder(sparse_output=True)), make_column_selector(dtype_include=object)),
    ]).fit(frame)
    spec = from_column_transformer(ct)
    assert spec.source_columns == ["age", "const", "income", "hours", "job", "sex"]
    assert spec.columns[0].mean == 0.0 and spec.columns[3].std == 1.0
    _same(spec, ct, frame)


@pytest.mark.parametrize("handle_unknown", ["error", "ignore", "infrequent_if_exist"])
def test_infrequent_and_unknown_categories_follow_the_encoder(frame, handle_unknown):
    ct = ColumnTransformer([("cat", OneHotEncoder(min_frequency=10, handle_unknown=handle_unknown), ["job"])]).fit(frame)
    spec = from_column_transformer(ct)
    assert spec.columns[0].levels == ("clerk", "nurse", "pilot", INFREQUENT)    # 'rare' (< 10 rows) joins it, last
    assert (frame["job"] == "rare").sum() < 10
    _same(spec, ct, frame)
    unseen = frame.iloc[:3].assign(job=["astronaut", "clerk", "rare"])
    if handle_unknown == "error":
        with pytest.raises(ValueError):
            ct.transform(unseen)
        with pytest.raises(InputError, match=r"column 'job' has 1 rows with categories unseen.*astronaut"):
            spec.transform(unseen)
    else:
        _same(spec, ct, unseen)
        expected_row = [0, 0, 0, 0] if handle_unknown == "ignore" else [0, 0, 0, 1]
        np.testing.assert_array_equal(spec.transform(unseen)[0], expected_row)


def test_ignore_without_infrequent_gives_zeros(frame):
    ct = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "code"])]).fit(frame)
    spec = from_column_transformer(ct)
    unseen = frame.iloc[:2].assign(job=["astronaut", "nurse"], code=[9, 2])
    _same(spec, ct, unseen)
    np.testing.assert_array_equal(spec.transform(unseen), [[0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 1, 0]])
    assert json.loads(json.dumps(spec.to_dict()))["columns"][0]["unknown"] == "zeros"


def test_unsupported_steps_are_named(frame):
    cases = [
        (ColumnTransformer([("scaled", MinMaxScaler(), ["age"])]), r"step 'scaled' \(MinMaxScaler on \['age'\]\)"),
        (ColumnTransformer([("num", make_pipeline(SimpleImputer(), StandardScaler()), ["age"])]),
         r"step 'num' is a Pipeline \(SimpleImputer → StandardScaler\)"),
        (ColumnTransformer([("cat", OneHotEncoder(drop="first"), ["job"])]), r"drop='first'.*column 'job'"),
        (ColumnTransformer([("a", StandardScaler(), ["age"]), ("b", OneHotEncoder(), ["age"])]),
         r"column 'age' feeds two ColumnTransformer steps \('a' and 'b'\)"),
    ]
    for ct, message in cases:
        with pytest.raises(InputError, match=message):
            from_column_transformer(ct.fit(frame))
    with pytest.raises(InputError, match="not fitted"):
        from_column_transformer(ColumnTransformer([("num", StandardScaler(), ["age"])]))
    with pytest.raises(InputError, match="without column names"):
        from_column_transformer(ColumnTransformer([("num", StandardScaler(), [0])]).fit(frame[["age"]].to_numpy()))
    with pytest.raises(InputError, match="expected a fitted sklearn ColumnTransformer, got StandardScaler"):
        from_column_transformer(StandardScaler().fit(frame[["age"]]))
