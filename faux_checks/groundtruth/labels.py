"""Label bias with a known mechanism: historical bias against a protected group.

Historical bias is label bias: the outcome of some qualified members of the disadvantaged group
was recorded as unfavourable, so training labels depend on the protected attribute beyond what the
features explain. A target model that never sees the protected attribute can only reproduce it
through proxies. Used by the Adult demo versions and the tester benchmark (our mechanism for a real
dataset; the fused synthetic data sets the y–c dependence through its generator instead).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._validation import require_columns
from ..errors import InputError

__all__ = ["inject_historical_bias"]


def inject_historical_bias(
    df: pd.DataFrame,
    *,
    protected: str = "sex",
    disadvantaged: str = "Female",
    label: str = "income",
    rate: float,
    seed: int,
) -> pd.Series:
    """Labels with injected historical bias: a share of the disadvantaged group's positives set to 0.

    Exactly ``round(rate * m)`` of the ``m`` rows with ``df[protected] == disadvantaged`` and
    ``df[label] == 1`` are chosen uniformly at random without replacement
    (``numpy.random.default_rng(seed)``) and their label is set to 0. Every other row keeps its
    label: no row of another group and no negative label is ever changed.

    Parameters
    ----------
    df : DataFrame
        Holds ``protected`` and ``label`` (0/1). Not modified.
    protected, disadvantaged : str
        Protected column and the level whose favourable labels are suppressed (compared as strings).
    label : str
        Binary label column, 1 = favourable.
    rate : float in [0, 1]
        Share of the disadvantaged group's positives flipped.
    seed : int

    Returns
    -------
    Series of int64, same index and name as ``df[label]``.

    Raises
    ------
    InputError
        Missing columns, a label that is not 0/1, or ``rate`` outside [0, 1].

    Examples
    --------
    >>> from faux_checks.inputs.datasets import load_adult
    >>> train_rows = load_adult(split="train")          # 1,112 women with income 1
    >>> y = inject_historical_bias(train_rows, rate=0.5, seed=0)
    >>> int((train_rows["income"] - y).sum())          # round(0.5 * 1112)
    556
    """
    require_columns(df, [protected, label], what="inject_historical_bias")
    if not (isinstance(rate, (int, float)) and 0.0 <= rate <= 1.0 and not math.isnan(rate)):
        raise InputError(f"rate must be a share in [0, 1], got {rate!r}")
    y = df[label]
    if y.isna().any() or not y.isin([0, 1]).all():
        raise InputError(f"label column '{label}' must hold only 0 and 1, found {sorted(y.dropna().unique())[:10]}")
    out = y.astype("int64").copy()
    group = df[protected].astype(str).to_numpy() == str(disadvantaged)
    positives = np.flatnonzero(group & (out.to_numpy() == 1))
    k = int(round(rate * len(positives)))
    chosen = np.random.default_rng(seed).choice(positives, size=k, replace=False)
    values = out.to_numpy().copy()
    values[chosen] = 0
    return pd.Series(values, index=out.index, name=out.name, dtype="int64")
