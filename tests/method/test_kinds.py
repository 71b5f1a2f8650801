"""The protected-attribute kinds table (faux_checks/kinds.py) says what the code does:
each entry's flags are checked against the encoder, the auxiliary model and the quality rows."""

from __future__ import annotations

import typing

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks.errors import InputError
from faux_checks.gate.bounds import quality_intervals
from faux_checks.inputs.protected import encode_protected
from faux_checks.kinds import KINDS, MAX_GROUPS, Kind, protected_kind
from faux_checks.method.auxiliary import AuxiliaryModel

COLUMNS = {
    "binary": pd.Series(["f", "m"] * 60),
    "multiclass": pd.Series(["a", "b", "c"] * 40),
    "continuous": pd.Series(np.linspace(18.0, 80.0, 120)),
}


def test_the_kind_literal_is_the_table():
    assert set(typing.get_args(Kind)) == set(KINDS) == {"binary", "multiclass", "continuous"}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_encoder_groups_as_the_table_says(kind):
    enc = encode_protected(COLUMNS[kind], kind=kind, name="c")
    entry = KINDS[kind]
    assert enc.kind == kind
    assert bool(enc.groups) is entry.grouped
    assert enc.n_outputs == entry.n_outputs(len(enc.groups))
    if entry.grouped:
        lo, hi = entry.group_counts
        assert lo <= len(enc.groups) <= hi
        assert enc.values.dtype == np.int64
    else:
        assert entry.group_counts is None and enc.values.dtype == np.float64


def test_more_groups_than_the_table_allows_is_refused():
    with pytest.raises(InputError, match="c"):
        encode_protected(pd.Series([f"g{i}" for i in range(MAX_GROUPS + 1)] * 3), kind="multiclass", name="c")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_aux_model_has_the_tables_output_count(kind):
    rng = np.random.default_rng(0)
    enc = encode_protected(COLUMNS[kind], kind=kind, name="c")
    X = rng.normal(size=(len(enc.values), 3)).astype(np.float32)
    aux = AuxiliaryModel(kind=kind, hidden=(4,), epochs=1, seed=0).fit(X, enc.values, groups=enc.groups)
    width = aux.net_(torch.as_tensor(X[:5])).shape[-1]
    assert width == KINDS[kind].n_outputs(len(enc.groups))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_quality_rows_use_the_tables_metric(kind):
    enc = encode_protected(COLUMNS[kind], kind=kind, name="c")
    y = enc.values
    if kind == "continuous":
        score = y + np.random.default_rng(1).normal(size=len(y))
    elif kind == "binary":
        score = y * 0.6 + 0.2
    else:
        score = np.eye(len(enc.groups))[y] * 0.7 + 0.1
    rows = quality_intervals(kind, y, score, enc.groups, 0.95)
    assert {r["metric"] for r in rows} == {KINDS[kind].quality_metric}
    assert len(rows) == (len(enc.groups) if KINDS[kind].multi_output else 1)


def test_an_unknown_kind_is_named():
    with pytest.raises(InputError, match=r"one of \['binary', 'continuous', 'multiclass'\], got 'ordinal'"):
        protected_kind("ordinal")
    assert protected_kind("continuous") is KINDS["continuous"]
