"""The bundled UCI Adult copy: shape, columns, labels, provenance, and no network access."""

from __future__ import annotations

import gzip
import hashlib
import re
import socket
from importlib import resources

import pandas as pd
import pytest

from faux_checks.inputs.datasets import (
    ADULT_CATEGORICAL,
    ADULT_COLUMNS,
    ADULT_FEATURES,
    ADULT_N_ROWS,
    ADULT_N_TRAIN,
    load_adult,
)
from faux_checks.errors import InputError


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    return load_adult(drop_missing=False)


def test_row_counts_before_and_after_dropping_missing(raw):
    assert raw.shape == (48_842, 16) == (ADULT_N_ROWS, len(ADULT_COLUMNS) + 1)
    clean = load_adult()
    assert clean.shape == (45_222, 16)
    assert clean.notna().all().all()
    assert list(clean.index) == list(range(len(clean)))


@pytest.mark.parametrize(
    ("split", "drop_missing", "n"),
    [("train", False, 32_561), ("test", False, 16_281), ("train", True, 30_162), ("test", True, 15_060)],
)
def test_splits_are_uci_files(split, drop_missing, n):
    df = load_adult(split=split, drop_missing=drop_missing)
    assert len(df) == n
    assert set(df["split"]) == {split}


def test_columns_and_dtypes(raw):
    assert list(raw.columns) == ADULT_COLUMNS + ["split"]
    for col in ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week", "income"):
        assert pd.api.types.is_integer_dtype(raw[col]), col
    assert raw["sex"].map(type).eq(str).all()
    assert (raw["split"].iloc[:ADULT_N_TRAIN] == "train").all()
    assert (raw["split"].iloc[ADULT_N_TRAIN:] == "test").all()


def test_labels_binary_with_uci_counts(raw):
    assert set(raw["income"].unique()) == {0, 1}
    # PROVENANCE.md: 7,841 + 3,846 ">50K" (adult.test's trailing '.' stripped, so all are counted)
    assert int(raw["income"].sum()) == 7_841 + 3_846
    by_split = raw.groupby("split")["income"].sum()
    assert by_split.to_dict() == {"train": 7_841, "test": 3_846}


def test_sex_and_missing_values_as_in_provenance(raw):
    counts = raw.groupby("split")["sex"].value_counts().to_dict()
    assert counts == {("train", "Male"): 21_790, ("train", "Female"): 10_771,
                      ("test", "Male"): 10_860, ("test", "Female"): 5_421}
    rows_with_missing = raw.isna().any(axis=1).groupby(raw["split"]).sum().to_dict()
    assert rows_with_missing == {"train": 2_399, "test": 1_221}
    assert set(raw.columns[raw.isna().any()]) == {"workclass", "occupation", "native-country"}
    assert not (raw == "?").any().any()


def test_feature_lists():
    assert "sex" not in ADULT_FEATURES and "income" not in ADULT_FEATURES
    assert "fnlwgt" not in ADULT_FEATURES and "education" not in ADULT_FEATURES
    assert "education-num" in ADULT_FEATURES
    assert set(ADULT_FEATURES) <= set(ADULT_COLUMNS)
    assert set(ADULT_CATEGORICAL) <= set(ADULT_FEATURES)
    clean = load_adult()
    for col in ADULT_FEATURES:
        is_string = clean[col].map(type).eq(str).all()
        assert is_string == (col in ADULT_CATEGORICAL), col


def test_no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("load_adult tried to open a network connection")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert len(load_adult()) == 45_222


def test_bundled_file_matches_attribution():
    data = resources.files("faux_checks.inputs").joinpath("data")
    text = data.joinpath("ATTRIBUTION.md").read_text()
    assert "CC BY 4.0" in text and "Becker" in text and "10.24432/C5XW20" in text
    # sha256 of the original UCI files (PROVENANCE.md) are recorded
    assert "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d" in text
    assert "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05" in text
    blob = data.joinpath("adult.csv.gz").read_bytes()
    assert len(blob) < 2_000_000
    csv_sha = re.search(r"the uncompressed CSV \| [\d,]+ \| `([0-9a-f]{64})`", text).group(1)
    assert hashlib.sha256(gzip.decompress(blob)).hexdigest() == csv_sha


def test_bad_split_is_an_input_error():
    with pytest.raises(InputError, match="split must be"):
        load_adult(split="validation")
