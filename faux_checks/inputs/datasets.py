"""Bundled benchmark data: UCI Adult (Census Income), read from the package, never the network.

The file ``faux_checks/inputs/data/adult.csv.gz`` is UCI's ``adult.data`` followed by ``adult.test``
(48,842 rows), with only the changes listed in ``faux_checks/inputs/data/ATTRIBUTION.md`` (a header line,
adult.test's first line removed, the trailing ``.`` of adult.test's labels removed). Licence CC BY
4.0; cite Becker, B. & Kohavi, R. (1996), Adult, UCI Machine Learning Repository,
https://doi.org/10.24432/C5XW20.
"""

from __future__ import annotations

import gzip
from importlib import resources
from typing import Literal

import pandas as pd

from ..errors import InputError

__all__ = [
    "ADULT_COLUMNS",
    "ADULT_CATEGORICAL",
    "ADULT_FEATURES",
    "ADULT_N_ROWS",
    "ADULT_N_TRAIN",
    "load_adult",
]

#: Column names, in file order (from UCI's adult.names).
ADULT_COLUMNS: list[str] = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
    "native-country", "income",
]
#: Feature columns a target model uses: everything except ``sex`` (the protected attribute),
#: ``income`` (the label), ``fnlwgt`` (a census sampling weight, not a property of the person) and
#: ``education`` (the same information as ``education-num``, which is kept).
ADULT_FEATURES: list[str] = [
    "age", "workclass", "education-num", "marital-status", "occupation", "relationship", "race",
    "capital-gain", "capital-loss", "hours-per-week", "native-country",
]
#: The string-valued columns among :data:`ADULT_FEATURES` (one-hot encoded by a FeatureSpec).
ADULT_CATEGORICAL: list[str] = [
    "workclass", "marital-status", "occupation", "relationship", "race", "native-country",
]
#: Rows in the bundled file: 32,561 from adult.data then 16,281 from adult.test.
ADULT_N_TRAIN = 32_561
ADULT_N_ROWS = 48_842

_RESOURCE = "adult.csv.gz"


def load_adult(*, drop_missing: bool = True, split: Literal["all", "train", "test"] = "all") -> pd.DataFrame:
    """Load UCI Adult from the copy bundled in the package (no network access).

    Parameters
    ----------
    drop_missing : bool
        Drop the rows with a missing value (``?`` in the source, in workclass, occupation or
        native-country). Without dropping, those values are NaN (the FeatureSpec refuses them).
    split : {"all", "train", "test"}
        ``"train"``: the rows of UCI's adult.data; ``"test"``: the rows of adult.test (UCI's own
        held-out split); ``"all"``: both, adult.data first.

    Returns
    -------
    DataFrame
        Shapes (rows × 16 columns):

        ==========  ==================  ===============
        split       drop_missing=False  drop_missing=True
        ==========  ==================  ===============
        "all"       48,842              45,222
        "train"     32,561              30,162
        "test"      16,281              15,060
        ==========  ==================  ===============

        Columns: the 15 of :data:`ADULT_COLUMNS` plus ``split`` (``"train"``/``"test"``, the
        source file). ``income`` is int64, 1 for ``>50K`` (the favourable label) and 0 for
        ``<=50K``; ``sex`` stays a string (``"Female"``/``"Male"``); the other categorical
        columns are strings; numeric columns are int64. The index is reset (0..n−1).

    Raises
    ------
    InputError
        ``split`` is not one of the three values.

    Notes
    -----
    Source: Becker & Kohavi (1996), UCI Machine Learning Repository, dataset 2 "Adult",
    https://doi.org/10.24432/C5XW20, CC BY 4.0. The exact changes made to UCI's files and their
    sha256 are in ``faux_checks/inputs/data/ATTRIBUTION.md``.

    Examples
    --------
    >>> df = load_adult()
    >>> df.shape
    (45222, 16)
    >>> df["income"].mean().round(3)
    0.248
    """
    if split not in ("all", "train", "test"):
        raise InputError(f"split must be 'all', 'train' or 'test', got {split!r}")
    with resources.files("faux_checks.inputs").joinpath("data", _RESOURCE).open("rb") as raw:
        with gzip.open(raw, "rt", encoding="ascii") as text:
            df = pd.read_csv(text, skipinitialspace=True, na_values="?", keep_default_na=False)
    if list(df.columns) != ADULT_COLUMNS or len(df) != ADULT_N_ROWS:
        raise InputError(
            f"the bundled {_RESOURCE} has {len(df)} rows and columns {list(df.columns)}; expected "
            f"{ADULT_N_ROWS} rows and {ADULT_COLUMNS}. The package data is damaged: reinstall faux-checks"
        )
    labels = df["income"]
    if not labels.isin([">50K", "<=50K"]).all():
        raise InputError(f"the bundled {_RESOURCE} has unexpected income labels {sorted(labels.unique())}")
    df["income"] = (labels == ">50K").astype("int64")
    df["split"] = ["train"] * ADULT_N_TRAIN + ["test"] * (ADULT_N_ROWS - ADULT_N_TRAIN)
    if split != "all":
        df = df[df["split"] == split]
    if drop_missing:
        df = df.dropna()
    return df.reset_index(drop=True)
