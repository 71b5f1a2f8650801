"""A fitted scikit-learn ``ColumnTransformer`` as a :class:`~faux_checks.inputs.tabular.FeatureSpec`.

A team that already preprocesses with scikit-learn keeps its pipeline: the spec built here
encodes a DataFrame into the same matrix as ``ct.transform(frame)`` (same columns, same order,
the same floating-point operations, so :meth:`FeatureSpec.transform` equals it to the last bit
on the same input), and it is saved as JSON, so the gate never unpickles the pipeline.

What translates (anything else is an :class:`~faux_checks.errors.InputError` naming the step):

- ``StandardScaler`` → numeric columns, ``(x - mean_) / scale_`` (``with_mean=False``: mean 0;
  ``with_std=False``: scale 1; a zero-variance column keeps scikit-learn's scale 1);
- ``OneHotEncoder`` with ``drop=None`` → categorical columns, levels in ``categories_`` order
  (compared as strings, as :class:`FeatureSpec` does); infrequent categories
  (``min_frequency`` / ``max_categories``) become the ``"__infrequent__"`` level, last, as
  scikit-learn orders it; ``handle_unknown`` becomes the column's ``unknown`` rule
  (``"ignore"`` → all zeros, ``"error"`` → refused, ``"infrequent_if_exist"`` → the
  infrequent level, all zeros when there is none);
- ``"passthrough"`` (also the fitted remainder, and a ``FunctionTransformer`` without a
  function) → numeric columns as they are;
- ``"drop"`` → nothing;
- a ``Pipeline`` whose steps are one of the above plus ``"passthrough"`` steps.

The transformer must have been fitted on a DataFrame (``feature_names_in_``), so that the spec
can name its columns, and each column may feed one step only (a spec maps every encoded feature
back to one source column).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from ..errors import InputError
from .column_values import level_string
from .tabular import INFREQUENT, ColumnEncoding, FeatureSpec

__all__ = ["from_column_transformer"]

SUPPORTED = "StandardScaler, OneHotEncoder (drop=None), 'passthrough', 'drop', or a Pipeline of one of them"


def from_column_transformer(ct, *, name: str = "column-transformer") -> FeatureSpec:
    """The :class:`FeatureSpec` that reproduces a fitted ``ColumnTransformer``'s output matrix.

    Parameters
    ----------
    ct : sklearn.compose.ColumnTransformer
        Fitted on a DataFrame; its steps as in the module docstring.
    name : str
        The spec's name (messages and reports).

    Returns
    -------
    FeatureSpec
        ``spec.transform(frame)`` of shape (n, d) equals ``ct.transform(frame)`` (densified),
        ``d == len(ct.get_feature_names_out())``; ``spec.encode`` is the same in float32.

    Raises
    ------
    InputError
        Not a ColumnTransformer, not fitted, fitted without column names, a step that does
        not translate (named, with its class and columns), a column used by two steps, or
        one-hot categories that do not read as distinct strings (e.g. a missing value as a
        category).

    Notes
    -----
    Our reconstruction of scikit-learn 1.4–1.9's ``StandardScaler.transform`` and
    ``OneHotEncoder.transform`` (sklearn/preprocessing/_data.py, _encoders.py).
    """
    from sklearn.compose import ColumnTransformer

    if not isinstance(ct, ColumnTransformer):
        raise InputError(f"expected a fitted sklearn ColumnTransformer, got {type(ct).__name__}; pass the "
                         "ColumnTransformer step of your pipeline (e.g. pipeline.named_steps['preprocess'])")
    if not hasattr(ct, "transformers_"):
        raise InputError("the ColumnTransformer is not fitted; fit it on the training DataFrame first")
    names_in = getattr(ct, "feature_names_in_", None)
    if names_in is None:
        raise InputError("the ColumnTransformer was fitted on an array without column names; fit it on a DataFrame "
                         "so that the feature spec can name each source column")
    names_in = [str(c) for c in names_in]
    encodings: list[ColumnEncoding] = []
    used: dict[str, str] = {}
    for step_name, transformer, columns in ct.transformers_:
        cols = _column_names(columns, names_in, step_name)
        step = _single_step(transformer, step_name, cols)
        if step == "drop" or not cols:
            continue
        for col in cols:
            if col in used:
                raise InputError(f"column '{col}' feeds two ColumnTransformer steps ('{used[col]}' and '{step_name}'); "
                                 "a feature spec encodes each source column once")
            used[col] = step_name
        encodings.extend(_encodings(step, step_name, cols))
    if not encodings:
        raise InputError("the ColumnTransformer outputs no columns (every step is 'drop')")
    return FeatureSpec(columns=encodings, name=name)


def _column_names(columns, names_in: list[str], step_name: str) -> list[str]:
    """A fitted step's column selection (name, index, list, bool mask, slice) as column names."""
    if isinstance(columns, str):
        return [columns]
    if isinstance(columns, (int, np.integer)) and not isinstance(columns, bool):
        return [names_in[int(columns)]]
    if isinstance(columns, slice):
        if isinstance(columns.start, str) or isinstance(columns.stop, str):   # label slices include their end
            start = names_in.index(columns.start) if columns.start is not None else 0
            stop = names_in.index(columns.stop) + 1 if columns.stop is not None else len(names_in)
            return names_in[start:stop:columns.step]
        return names_in[columns]
    items = list(np.asarray(columns, dtype=object).ravel()) if not isinstance(columns, list) else list(columns)
    if items and all(isinstance(v, (bool, np.bool_)) for v in items):
        return [c for c, keep in zip(names_in, items, strict=False) if keep]
    out = []
    for v in items:
        if isinstance(v, (int, np.integer)):
            out.append(names_in[int(v)])
        elif isinstance(v, str):
            out.append(v)
        else:
            raise InputError(f"ColumnTransformer step '{step_name}': cannot read its column selection {columns!r}")
    return out


def _describe(transformer, cols: list[str]) -> str:
    return f"{type(transformer).__name__ if not isinstance(transformer, str) else repr(transformer)} on {cols}"


def _single_step(transformer, step_name: str, cols: list[str]):
    """'drop', 'passthrough' or the one supported estimator a step (or a Pipeline) amounts to."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

    if isinstance(transformer, str):
        if transformer in ("drop", "passthrough"):
            return transformer
        raise InputError(f"ColumnTransformer step '{step_name}' ({transformer!r}) is not supported; supported: {SUPPORTED}")
    if transformer is None:
        return "passthrough"
    if isinstance(transformer, Pipeline):
        inner = [s for _, s in transformer.steps if s not in (None, "passthrough")]
        if len(inner) > 1:
            chain = " → ".join(type(s).__name__ for s in inner)
            raise InputError(f"ColumnTransformer step '{step_name}' is a Pipeline ({chain}) on {cols}; a feature spec "
                             f"reproduces one step per column: {SUPPORTED}. Fit the spec with `faux-checks spec` instead")
        return _single_step(inner[0], step_name, cols) if inner else "passthrough"
    if isinstance(transformer, FunctionTransformer) and transformer.func is None and transformer.inverse_func is None:
        return "passthrough"   # how a fitted ColumnTransformer stores remainder='passthrough'
    if isinstance(transformer, (StandardScaler, OneHotEncoder)):
        return transformer
    raise InputError(f"ColumnTransformer step '{step_name}' ({_describe(transformer, cols)}) is not supported; "
                     f"supported: {SUPPORTED}. Replace the step, or fit the spec from your data with `faux-checks spec`")


def _encodings(step, step_name: str, cols: list[str]) -> list[ColumnEncoding]:
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    if step == "passthrough":
        return [ColumnEncoding(c, "numeric", mean=0.0, std=1.0) for c in cols]
    if isinstance(step, StandardScaler):
        return _scaler(step, step_name, cols)
    if isinstance(step, OneHotEncoder):
        return _one_hot(step, step_name, cols)
    raise AssertionError(step)  # _single_step returns nothing else


def _scaler(scaler, step_name: str, cols: list[str]) -> list[ColumnEncoding]:
    n = len(cols)
    if getattr(scaler, "n_features_in_", n) != n:
        raise InputError(f"ColumnTransformer step '{step_name}': StandardScaler was fitted on "
                         f"{scaler.n_features_in_} columns, the step selects {n} ({cols})")
    mean = scaler.mean_ if scaler.with_mean else np.zeros(n)
    scale = scaler.scale_ if scaler.with_std else np.ones(n)
    var = getattr(scaler, "var_", None)
    out = []
    for i, col in enumerate(cols):
        std = float(scale[i])
        if var is not None and float(var[i]) == 0.0 and std == 1.0:
            std = 0.0   # constant at fit time: scikit-learn divides by 1, as FeatureSpec does for std 0 (and reports it)
        out.append(ColumnEncoding(col, "numeric", mean=float(mean[i]), std=std))
    return out


def _one_hot(encoder, step_name: str, cols: list[str]) -> list[ColumnEncoding]:
    if len(encoder.categories_) != len(cols):
        raise InputError(f"ColumnTransformer step '{step_name}': OneHotEncoder was fitted on "
                         f"{len(encoder.categories_)} columns, the step selects {len(cols)} ({cols})")
    drop_idx = getattr(encoder, "drop_idx_", None)
    infrequent = getattr(encoder, "infrequent_categories_", None) or [None] * len(cols)
    rules: dict[str, Literal["infrequent_or_error", "zeros", "error"]] = {
        "ignore": "zeros", "error": "error", "infrequent_if_exist": "infrequent_or_error"}   # ColumnEncoding.unknown
    rule = rules.get(encoder.handle_unknown)
    if rule is None:
        raise InputError(f"ColumnTransformer step '{step_name}': OneHotEncoder(handle_unknown={encoder.handle_unknown!r}) "
                         "is not supported; use 'error', 'ignore' or 'infrequent_if_exist'")
    out = []
    for i, col in enumerate(cols):
        if drop_idx is not None and drop_idx[i] is not None:
            raise InputError(f"ColumnTransformer step '{step_name}': OneHotEncoder(drop={encoder.drop!r}) drops a "
                             f"category of column '{col}'; a feature spec keeps every level. Supported: {SUPPORTED}")
        categories = list(encoder.categories_[i])
        missing = [c for c in categories if c is None or (isinstance(c, float) and math.isnan(c))]
        if missing:
            raise InputError(f"ColumnTransformer step '{step_name}': column '{col}' has a missing value as a one-hot "
                             "category; a feature spec refuses missing values: impute them before the encoder")
        rare = set(level_string(c) for c in (infrequent[i] if infrequent[i] is not None else []))
        levels = [level_string(c) for c in categories]
        if len(set(levels)) != len(levels):
            raise InputError(f"ColumnTransformer step '{step_name}': column '{col}' has categories that read as the "
                             f"same string ({categories[:10]}); a feature spec compares levels as strings")
        frequent = [lvl for lvl in levels if lvl not in rare]
        column_rule = rule
        if rare:
            frequent.append(INFREQUENT)   # scikit-learn puts the infrequent column last
        elif rule == "infrequent_or_error":
            column_rule = "zeros"         # infrequent_if_exist with no infrequent category: all zeros
        aliases = tuple((lvl, INFREQUENT) for lvl in levels if lvl in rare)
        out.append(ColumnEncoding(col, "categorical", levels=tuple(frequent), aliases=aliases, unknown=column_rule))
    return out
