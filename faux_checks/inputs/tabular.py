"""Feature encoding: from a DataFrame to the float32 matrix X the target model sees.

A :class:`FeatureSpec` is fitted once (on the training data of the target model), saved as
JSON next to the model, and then encodes any later data the same way. It also maps each
encoded feature back to its source column, so that per-feature evidence (docs/method.md, RQ2) can
be reported per column (one-hot groups summed).

Rules (documented, never silent):

- numeric columns are standardised with the fitted mean and standard deviation (a constant
  column is centred only and reported by :meth:`FeatureSpec.constant_columns`);
- boolean, string and categorical columns are one-hot encoded, levels compared as strings
  (``1`` and ``1.0`` are one level, so integer codes read back as floats still match); levels
  seen fewer than ``min_frequency`` times at fit time are grouped into one ``"__infrequent__"`` level
  (the same rule as scikit-learn's ``OneHotEncoder(min_frequency=...)``), since rare one-hot
  levels were measured to dominate gradients with noise (docs/method.md, Adult evidence);
- at encode time a category never seen at fit time goes to ``"__infrequent__"`` when that level
  exists and is an :class:`~faux_checks.errors.InputError` otherwise (a column's ``unknown``
  setting can ask for all zeros or always an error instead, as scikit-learn's
  ``OneHotEncoder(handle_unknown=...)``: :func:`faux_checks.inputs.column_transformer.from_column_transformer`);
- missing values are an :class:`~faux_checks.errors.InputError` naming every such column and its
  row count (drop or impute them first): they are never encoded as zeros. A numeric column marked
  ``missing = "indicator"`` (:meth:`FeatureSpec.with_missing_indicators`, for a target that takes NaN)
  encodes three features instead: its standardised value (0, the fitted mean, where missing) and a
  two-level one-hot group ``column=__present__`` / ``column=__missing__``, so that missingness is a
  level the auxiliary model reads and the counterfactual may switch; the target receives NaN where the
  group says missing (:func:`faux_checks.inputs.missing.nan_inputs`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from .._validation import as_frame, fmt_count, require_columns
from ..errors import InputError
from .column_values import (MISSING_FIX, as_level_strings, check_finite, is_numeric, missing_counts, missing_message,
                            numbers_as_text)

__all__ = ["ColumnEncoding", "FeatureSpec", "INFREQUENT", "MISSING_LEVELS", "UNKNOWN_RULES"]

INFREQUENT = "__infrequent__"
#: The two levels of a numeric column's missing-value indicator group, in encoded order.
MISSING_LEVELS = ("__present__", "__missing__")
SCHEMA_VERSION = 1
#: What a categorical column does with a category unseen at fit time (``ColumnEncoding.unknown``):
#: ``infrequent_or_error`` (the default) joins ``"__infrequent__"`` when the column has that level and is
#: an error otherwise; ``zeros`` encodes all zeros (scikit-learn ``handle_unknown="ignore"``);
#: ``error`` always refuses (scikit-learn ``handle_unknown="error"``).
UNKNOWN_RULES = ("infrequent_or_error", "zeros", "error")
UnknownRule = Literal["infrequent_or_error", "zeros", "error"]


@dataclass(frozen=True)
class ColumnEncoding:
    """How one source column becomes one or more encoded features.

    Attributes
    ----------
    name : str
        Source column name.
    kind : {"numeric", "categorical"}
        Numeric columns give one standardised feature; categorical ones one feature per level.
    mean, std : float
        Standardisation of a numeric column (``(x - mean) / std``; std 0, a constant column, is
        centred only); unused for categorical.
    levels : list of str
        Categorical levels in encoded order (values are compared as strings).
    aliases : tuple of (str, str)
        Categorical values replaced by a canonical value before encoding (e.g. ``("Husband", "Spouse")``):
        the model never sees the difference between the values that share a canonical one.
    unknown : {"infrequent_or_error", "zeros", "error"}
        A categorical column's rule for categories unseen at fit time (:data:`UNKNOWN_RULES`).
    missing : {"refuse", "indicator"}
        A missing value is an error (``"refuse"``), or (numeric columns, for a target that takes NaN) the
        column encodes its value and a present/missing one-hot group (:data:`MISSING_LEVELS`).
    """

    name: str
    kind: Literal["numeric", "categorical"]
    mean: float = 0.0
    std: float = 1.0
    levels: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    unknown: UnknownRule = "infrequent_or_error"
    missing: Literal["refuse", "indicator"] = "refuse"

    @property
    def width(self) -> int:
        """Number of encoded features this column produces (a numeric column with an indicator: 3)."""
        if self.kind == "numeric":
            return 3 if self.missing == "indicator" else 1
        return len(self.levels)

    def feature_names(self) -> list[str]:
        """Encoded feature names, ``col`` or ``col=level`` (an indicator's levels: :data:`MISSING_LEVELS`)."""
        if self.kind == "numeric":
            return [self.name] + ([f"{self.name}={lvl}" for lvl in MISSING_LEVELS] if self.missing == "indicator" else [])
        return [f"{self.name}={lvl}" for lvl in self.levels]


@dataclass
class FeatureSpec:
    """JSON-serialisable encoding of source columns into the target model's features.

    Parameters
    ----------
    columns : list of ColumnEncoding
        In encoded order.
    name : str
        A label used in messages and reports (e.g. ``"adult-v1"``).

    Examples
    --------
    >>> spec = FeatureSpec.fit(df, columns=["age", "workclass"], min_frequency=20)
    >>> X = spec.encode(df)            # (n, d) float32
    >>> spec.feature_names[:2]
    ['age', 'workclass=Private']
    """

    columns: list[ColumnEncoding]
    name: str = "features"
    schema_version: int = SCHEMA_VERSION
    _index: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ fitting
    @classmethod
    def fit(
        cls,
        data: pd.DataFrame,
        columns: Sequence[str],
        *,
        categorical: Sequence[str] = (),
        min_frequency: int | float = 0,
        aliases: dict[str, dict[str, str]] | None = None,
        name: str = "features",
    ) -> "FeatureSpec":
        """Learn standardisation and category levels from ``data``.

        Parameters
        ----------
        data : DataFrame of shape (n, any)
            Training rows; not modified.
        columns : sequence of str
            Source columns the model uses, in order.
        categorical : sequence of str
            Numeric columns to one-hot encode anyway (e.g. integer codes).
        min_frequency : int or float
            Levels with fewer rows (int) or a smaller share of rows (float in (0, 1)) are grouped
            into ``"__infrequent__"``.
        aliases : dict of column -> {value: canonical value}, optional
            Categorical values merged before encoding, at fit and at every encode (e.g. Adult's
            ``{"relationship": {"Husband": "Spouse", "Wife": "Spouse"}}``: a value that names the
            protected attribute by definition, canonicalised away).

        Raises
        ------
        InputError
            If a column is missing, has missing values, or is entirely empty.
        """
        frame = as_frame(data)
        require_columns(frame, columns, what="FeatureSpec.fit")
        n = len(frame)
        if n == 0:
            raise InputError("FeatureSpec.fit: the data has 0 rows; pass the training rows")
        threshold = min_frequency * n if isinstance(min_frequency, float) and min_frequency < 1 else min_frequency
        missing = missing_counts(frame, columns)
        if missing:
            raise InputError(missing_message(missing, n, what="FeatureSpec.fit", fix=MISSING_FIX))
        encodings: list[ColumnEncoding] = []
        for col in columns:
            s = frame[col]
            if is_numeric(s) and col not in categorical:
                values = s.to_numpy(dtype="float64")
                std = float(values.std())
                encodings.append(
                    ColumnEncoding(col, "numeric", mean=float(values.mean()), std=std)
                )
            else:
                mapping = tuple((str(k), str(v)) for k, v in ((aliases or {}).get(col) or {}).items())
                counts = _canonical(as_level_strings(s), mapping).value_counts()
                frequent = sorted(str(v) for v, c in counts.items() if c >= threshold)
                levels = tuple(frequent + ([INFREQUENT] if len(frequent) < len(counts) else []))
                encodings.append(ColumnEncoding(col, "categorical", levels=levels, aliases=mapping))
        return cls(columns=encodings, name=name)

    # ------------------------------------------------------------------ encoding
    def encode(self, data: pd.DataFrame) -> np.ndarray:
        """Encode ``data`` into the target model's feature matrix.

        Parameters
        ----------
        data : DataFrame of shape (n, any)
            Must hold every source column of the spec; other columns are ignored. Not modified.

        Returns
        -------
        ndarray of shape (n, d), float32
            ``d == self.n_features``; :meth:`transform` rounded to float32.

        Raises
        ------
        InputError
            Missing column (names what is present), missing values (column and row count),
            a non-numeric value in a numeric column, a value too large for float32 once
            standardised, or a category unseen at fit time that the column's ``unknown`` rule
            refuses.
        """
        return self._encode(data, np.float32)

    def transform(self, data: pd.DataFrame) -> np.ndarray:
        """Encode ``data`` in float64: the same matrix as :meth:`encode` before rounding to float32.

        What scikit-learn's ``ColumnTransformer.transform`` returns for the pipeline a spec was
        made from (:func:`~faux_checks.inputs.column_transformer.from_column_transformer`), to the last bit for the same operations.

        Parameters
        ----------
        data : DataFrame of shape (n, any)
            Must hold every source column of the spec; not modified.

        Returns
        -------
        ndarray of shape (n, d), float64

        Raises
        ------
        InputError
            As :meth:`encode`.
        """
        return self._encode(data, np.float64)

    def _encode(self, data: pd.DataFrame, dtype) -> np.ndarray:
        frame = as_frame(data)
        require_columns(frame, self.source_columns, what=f"FeatureSpec '{self.name}'")
        n = len(frame)
        missing = missing_counts(frame, [c.name for c in self.columns if c.missing != "indicator"])
        if missing:
            raise InputError(missing_message(missing, n, what=f"FeatureSpec '{self.name}'", fix=MISSING_FIX))
        out = np.zeros((n, self.n_features), dtype=dtype)
        j = 0
        for enc in self.columns:
            s = frame[enc.name]
            if enc.kind == "numeric":
                values = pd.to_numeric(s, errors="coerce")
                bad = values.isna() & s.notna()
                if bad.any():
                    example = s[bad].iloc[0]
                    raise InputError(
                        f"FeatureSpec '{self.name}': numeric column '{enc.name}' has {fmt_count(bad.sum())} "
                        f"non-numeric values in {fmt_count(n)} rows (e.g. {example!r}); clean the column "
                        "or refit the spec with it as categorical"
                    )
                scale = enc.std if enc.std > 0 else 1.0  # constant column: centred only
                raw = values.to_numpy(dtype="float64")
                absent = np.isnan(raw)                    # only an indicator column gets here with missing values
                with np.errstate(over="ignore", invalid="ignore"):
                    out[:, j] = np.where(absent, 0.0, (raw - enc.mean) / scale).astype(dtype)
                check_finite(raw[~absent], out[~absent, j], enc.name, what=f"FeatureSpec '{self.name}'")
                if enc.missing == "indicator":
                    out[:, j + 1], out[:, j + 2] = ~absent, absent
            else:
                levels = _canonical(as_level_strings(s), enc.aliases)
                index = {lvl: i for i, lvl in enumerate(enc.levels)}
                codes = levels.map(index)
                unknown = codes.isna()
                if unknown.any():
                    if enc.unknown == "infrequent_or_error" and INFREQUENT in index:
                        codes = codes.where(~unknown, index[INFREQUENT])
                        unknown = codes.isna()
                    elif enc.unknown != "zeros":
                        seen = sorted(set(levels[unknown]))[:5]
                        fix = ("the column refuses unseen categories (unknown = 'error', as the scikit-learn "
                               "encoder it came from); refit the spec on data that holds them"
                               if enc.unknown == "error" else
                               "Refit the spec on data that holds them, or fit with min_frequency > 0 so that "
                               "unseen levels join '__infrequent__'")
                        raise InputError(
                            f"FeatureSpec '{self.name}': column '{enc.name}' has {fmt_count(unknown.sum())} rows "
                            f"with categories unseen at fit time (e.g. {seen}); known: {list(enc.levels)[:10]}. "
                            + fix
                        )
                known = ~unknown.to_numpy()   # 'zeros': an unseen category leaves the row's group all zero
                out[np.flatnonzero(known), j + codes[known].to_numpy(dtype=np.int64)] = 1.0
            j += enc.width
        return out

    # ------------------------------------------------------------------ feature <-> column maps
    @property
    def source_columns(self) -> list[str]:
        """Source column names, in order."""
        return [c.name for c in self.columns]

    @property
    def feature_names(self) -> list[str]:
        """Encoded feature names (length ``n_features``)."""
        return [f for c in self.columns for f in c.feature_names()]

    @property
    def n_features(self) -> int:
        """Number of encoded features d."""
        return sum(c.width for c in self.columns)

    def with_missing_indicators(self, columns: Sequence[str]) -> "FeatureSpec":
        """This spec with the numeric ``columns`` encoded as value and present/missing group (``missing = "indicator"``).

        For a target that takes NaN: the encoded matrix stays finite (the auxiliary model's input) and the
        target receives NaN where the group says missing (:func:`faux_checks.inputs.missing.nan_inputs`).
        The spec itself is not changed.

        Raises
        ------
        InputError
            A column that is not a numeric column of the spec (each named).
        """
        kinds = {c.name: c.kind for c in self.columns}
        wrong = [c for c in columns if kinds.get(c) != "numeric"]
        if wrong:
            raise InputError(f"FeatureSpec '{self.name}': missing-value indicators are for numeric input columns; "
                             f"{wrong} {'is' if len(wrong) == 1 else 'are'} not")
        marked = [replace(c, missing="indicator") if c.name in columns else c for c in self.columns]
        return FeatureSpec(columns=marked, name=self.name, schema_version=self.schema_version)

    def missing_positions(self) -> np.ndarray:
        """(k, 3) int64: the encoded positions (value, present, missing) of each indicator column, in column order."""
        starts = np.cumsum([0] + [c.width for c in self.columns])[:-1]
        rows = [[s, s + 1, s + 2] for c, s in zip(self.columns, starts, strict=True) if c.missing == "indicator"]
        return np.asarray(rows, dtype=np.int64).reshape(-1, 3)

    def feature_to_column(self) -> np.ndarray:
        """Array of shape (d,): index of the source column of each encoded feature."""
        return np.repeat(np.arange(len(self.columns)), [c.width for c in self.columns])

    def feature_mask(self, column: str) -> np.ndarray:
        """Bool array of shape (d,): the encoded features that come from ``column``."""
        if column not in self.source_columns:
            return np.zeros(self.n_features, dtype=bool)
        return self.feature_to_column() == self.source_columns.index(column)

    def aggregate(self, per_feature: np.ndarray) -> np.ndarray:
        """Sum per-feature values back to source columns.

        Parameters
        ----------
        per_feature : ndarray of shape (n, d)

        Returns
        -------
        ndarray of shape (n, n_columns)
            One-hot groups summed (docs/method.md, "Per-feature evidence").
        """
        per_feature = np.asarray(per_feature)
        if per_feature.ndim != 2 or per_feature.shape[1] != self.n_features:
            raise InputError(
                f"aggregate: expected an array of shape (n, {self.n_features}), got {per_feature.shape}"
            )
        out = np.zeros((per_feature.shape[0], len(self.columns)), dtype=per_feature.dtype)
        np.add.at(out.T, self.feature_to_column(), per_feature.T)
        return out

    def constant_columns(self) -> list[str]:
        """Numeric columns that were constant at fit time, or categorical ones with one level."""
        return [c.name for c in self.columns if (c.kind == "numeric" and c.std == 0)
                or (c.kind == "categorical" and len(c.levels) == 1)]

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        """JSON-serialisable dict (``schema_version`` included)."""
        return {
            "schema_version": self.schema_version,
            "name": self.name,
            "columns": [_column_dict(c) for c in self.columns],
        }

    @classmethod
    def from_dict(cls, payload: dict) -> "FeatureSpec":
        """Inverse of :meth:`to_dict`. Raises InputError on an unknown schema version."""
        version = payload.get("schema_version")
        if version != SCHEMA_VERSION:
            raise InputError(f"FeatureSpec schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
        cols = [
            ColumnEncoding(
                name=c["name"], kind=c["kind"], mean=float(c.get("mean", 0.0)),
                std=float(c.get("std", 1.0)), levels=tuple(c.get("levels", ())),
                aliases=tuple((str(a), str(b)) for a, b in c.get("aliases", ())),
                unknown=_unknown_rule(c.get("unknown", "infrequent_or_error"), c.get("name")),
                missing=_missing_rule(c.get("missing", "refuse"), c.get("name")),
            )
            for c in payload["columns"]
        ]
        return cls(columns=cols, name=payload.get("name", "features"))

    def save(self, path: str | Path) -> Path:
        """Write the spec as JSON; refuses to overwrite an existing file."""
        path = Path(path)
        if path.exists():
            raise InputError(f"{path} exists already; FeatureSpec.save never overwrites, choose another path")
        path.write_text(json.dumps(self.to_dict(), indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path) -> "FeatureSpec":
        """Read a spec written by :meth:`save`."""
        try:
            payload = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read feature spec {path}: {exc}") from exc
        return cls.from_dict(payload)

    @classmethod
    def passthrough(cls, data: pd.DataFrame, *, exclude: Sequence[str] = (), name: str = "passthrough") -> "FeatureSpec":
        """Numeric columns as they are (no scaling), in file order, minus ``exclude``.

        Used by the CLI when no feature spec is given: the model receives the data's
        numeric columns unchanged. Text and boolean columns whose values are not numbers (a
        categorical such as ``job``) are not inputs; a text column that holds numbers is refused
        (:func:`~faux_checks.inputs.column_values.numbers_as_text`), since leaving it out would shift every later input.

        Raises
        ------
        InputError
            If no numeric column is left, or a column other than ``exclude`` is read as text although
            it holds numbers: some values unparsable (``'1,234.5'``, ``'-162,4'``, ``'?'``: every such column,
            its count, an example and its row, and the ``--thousands``/``--decimal`` option that reads it),
            or all of them numbers stored as text.
        """
        frame = as_frame(data)
        problems = [p for c in frame.columns if c not in exclude for p in [numbers_as_text(frame[c], c)] if p]
        if problems:
            raise InputError(
                f"{'; '.join(problems)}. Without a feature spec the model receives the numeric columns only, in "
                "file order, so such a column would be left out and every input after it would shift by one. "
                "Read the numbers with the option named for each column, or write them plainly (1234.5), fix "
                "or remove the other values, or "
                "pass the feature spec the model was trained with (--feature-spec); nothing was scored"
            )
        cols = [c for c in frame.columns if c not in exclude and is_numeric(frame[c])]
        if not cols:
            raise InputError(
                f"no numeric feature columns left in the data after excluding {list(exclude)}; "
                f"columns present: {list(map(str, frame.columns))}. Pass a feature spec for categorical data"
            )
        return cls(columns=[ColumnEncoding(str(c), "numeric", mean=0.0, std=1.0) for c in cols], name=name)


def _column_dict(c: ColumnEncoding) -> dict:
    """One column of :meth:`FeatureSpec.to_dict`; ``unknown`` only when it is not the default (older readers)."""
    out = {**asdict(c), "levels": list(c.levels), "aliases": [list(a) for a in c.aliases]}
    if c.unknown == "infrequent_or_error":
        del out["unknown"]
    if c.missing == "refuse":
        del out["missing"]
    return out


def _unknown_rule(value, column) -> UnknownRule:
    if value not in UNKNOWN_RULES:
        raise InputError(f"FeatureSpec column {column!r}: unknown = {value!r} is not one of {list(UNKNOWN_RULES)}")
    return value


def _missing_rule(value, column) -> Literal["refuse", "indicator"]:
    if value not in ("refuse", "indicator"):
        raise InputError(f"FeatureSpec column {column!r}: missing = {value!r} is not one of ['refuse', 'indicator']")
    return value


def _canonical(levels: pd.Series, aliases: tuple[tuple[str, str], ...]) -> pd.Series:
    """Level strings with each aliased value replaced by its canonical value (NA kept)."""
    return levels.replace(dict(aliases)) if aliases else levels
