"""Streaming fAux scores for audit data larger than memory (issue 7).

:func:`score_stream` reads a Parquet or CSV file in chunks of at most ``chunk_rows`` rows, so
peak memory is set by the chunk and by the auxiliary model's training sample, never by the
number of rows n. Two passes over the file:

1. **Sample pass** (:func:`sample_pass`). Counts rows, missing protected values and the
   protected attribute's levels, and keeps the auxiliary model's training sample: the
   ``policy.aux.max_train_rows`` audited rows with the smallest seeded hash key of their row
   number (bottom-k sampling, :func:`row_keys`; a uniform sample without replacement). The key
   depends only on the row number and ``policy.seed``, so the sample is the same whatever the
   chunk size and however the file is split into shards: the bottom-k of a union is the
   bottom-k of the parts' bottom-k (:func:`merge_samples`). With n ≤ ``max_train_rows`` every
   audited row is in it, in input order, exactly as :func:`faux_checks.check.run_check` trains.
2. **Setup** (:func:`prepare_scoring`). The auxiliary model is trained once on that sample
   (seed ``policy.seed``; quality on its held-out rows) or a given one is wrapped (quality on the
   whole sample). The protected groups and the target's output form are fixed here, once, for
   every chunk.
3. **Score pass** (:func:`score_pass`). Every chunk is encoded with the
   :class:`~faux_checks.FeatureSpec` and scored with :class:`~faux_checks.FAuxTester`; one row per
   input row (``row``, ``lic_score``, ``flagged``, ``status``, ``group``) is appended to the
   scores file in input order, and :class:`StreamCounts` keeps running counts that give the
   flagged fraction, the undefined count and per-group counts exactly (no score is kept in memory).

Chunks never cross a Parquet row group (a row group larger than ``chunk_rows`` is read in
several batches); CSV chunks are ``pd.read_csv(chunksize=chunk_rows)``. The sharded Prefect flow
(``flows/shard.py``) runs the same two passes on contiguous row-group ranges and merges with
:func:`merge_samples`, :meth:`StreamCounts.merge` and :func:`merge_score_parts`; its scores are
those of :func:`score_stream` (same chunks, same models, same per-row maths).

Differences from :func:`~faux_checks.check.run_check`, each recorded in ``StreamSummary.notes``:
every row is scored (``policy.max_rows`` is not applied); baseline testers and per-feature
evidence are not computed (a policy with a *gating* baseline tester gives ``undecided``); a
continuous protected attribute is grouped by the training sample's quartiles; IG's ``"mean"``
baseline is the training sample's mean.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from ._validation import fmt_count
from .errors import InputError
from .inputs.protected import ProtectedAttribute, encode_protected
from .inputs.tabular import FeatureSpec
from .method.auxiliary import AuxiliaryModel
from .method.faux import FAuxTester
from .method.output import TargetOutput, resolve_output_form
from .policy import Policy

__all__ = [
    "DataSource",
    "ProtectedCodec",
    "SamplePart",
    "ScoringPlan",
    "StreamCounts",
    "StreamSummary",
    "check_missing_protected",
    "csv_to_parquet",
    "key_pass",
    "merge_samples",
    "merge_score_parts",
    "peak_rss_mb",
    "prepare_scoring",
    "row_keys",
    "sample_pass",
    "score_pass",
    "score_stream",
    "summarize",
]

#: Distinct protected values tracked exactly; beyond this the attribute must be continuous.
MAX_LEVELS = 1_000
SCORE_COLUMNS = ("row", "lic_score", "flagged", "status", "group")
_U64 = np.uint64


# ---------------------------------------------------------------------------- data source
@dataclass(frozen=True)
class DataSource:
    """A Parquet or CSV file read in chunks (never loaded whole).

    Attributes
    ----------
    path : str
    format : {"parquet", "csv"}
        ``.parquet`` is Parquet; anything else is CSV (as :func:`faux_checks.inputs.io.read_table`).
    columns : tuple of str
        Every column of the file.
    row_group_rows : tuple of int
        Rows per Parquet row group (empty for CSV).
    """

    path: str
    format: str
    columns: tuple[str, ...]
    row_group_rows: tuple[int, ...] = ()

    @classmethod
    def open(cls, path: str | Path) -> "DataSource":
        """Read the file's schema (Parquet metadata or the CSV header), not its rows.

        Raises
        ------
        InputError
            Missing or unreadable file.
        """
        path = Path(path)
        if not path.is_file():
            raise InputError(f"data file {path} does not exist")
        try:
            if path.suffix == ".parquet":
                pf = _parquet_file(path)
                meta = pf.metadata
                rows = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
                return cls(str(path), "parquet", tuple(pf.schema_arrow.names), rows)
            header = pd.read_csv(path, nrows=0, skipinitialspace=True)
            return cls(str(path), "csv", tuple(map(str, header.columns)))
        except InputError:
            raise
        except Exception as exc:
            raise InputError(f"cannot read data file {path}: {type(exc).__name__}: {exc}") from exc

    @property
    def n_rows(self) -> int | None:
        """Row count from the Parquet metadata; None for CSV (known after a pass)."""
        return sum(self.row_group_rows) if self.format == "parquet" else None

    @property
    def n_row_groups(self) -> int:
        return len(self.row_group_rows)

    def row_group_starts(self) -> np.ndarray:
        """Input-row number of each row group's first row, shape (n_row_groups,)."""
        return np.concatenate([[0], np.cumsum(self.row_group_rows)[:-1]]).astype(np.int64)

    def require(self, columns: Sequence[str], *, what: str) -> None:
        """Raise InputError naming the columns the file lacks."""
        missing = [c for c in columns if c not in self.columns]
        if missing:
            shown = ", ".join(self.columns[:30]) + (" ..." if len(self.columns) > 30 else "")
            raise InputError(f"{what}: column(s) {missing} not found in {self.path}; present columns: [{shown}]. "
                             "Fix the column name or the data file.")

    def iter_chunks(self, columns: Sequence[str], *, chunk_rows: int,
                    row_groups: tuple[int, int] | None = None) -> Iterator[tuple[int, pd.DataFrame]]:
        """Yield ``(first_row_number, frame)`` chunks of at most ``chunk_rows`` rows, in input order.

        Parameters
        ----------
        columns : sequence of str
            Columns to read (Parquet reads only these).
        row_groups : (start, stop), optional
            Parquet row groups ``start <= i < stop`` only (a shard); None reads the whole file.
        """
        if chunk_rows < 1:
            raise InputError(f"chunk_rows must be >= 1, got {chunk_rows}")
        columns = list(dict.fromkeys(columns))
        self.require(columns, what="streaming scorer")
        if self.format == "csv":
            if row_groups is not None:
                raise InputError("a CSV file has no row groups to shard by; convert it with csv_to_parquet first")
            try:
                with pd.read_csv(self.path, chunksize=chunk_rows, skipinitialspace=True, usecols=columns) as reader:
                    start = 0
                    for frame in reader:
                        yield start, frame[columns]
                        start += len(frame)
            except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
                raise InputError(f"cannot read data file {self.path}: {type(exc).__name__}: {exc}") from exc
            return
        pf = _parquet_file(self.path)
        first, stop = row_groups if row_groups is not None else (0, self.n_row_groups)
        if not 0 <= first <= stop <= self.n_row_groups:
            raise InputError(f"row groups {first}..{stop} out of range for {self.path} ({self.n_row_groups} row groups)")
        starts = self.row_group_starts()
        for rg in range(first, stop):
            start = int(starts[rg])
            for batch in pf.iter_batches(batch_size=chunk_rows, row_groups=[rg], columns=columns):
                frame = batch.to_pandas()
                yield start, frame
                start += len(frame)

    def probe_frame(self, columns: Sequence[str] | None = None, *, rows: int = 65_536) -> pd.DataFrame:
        """The first ``rows`` rows (column dtypes for a passthrough FeatureSpec); Parquet: no rows, its schema."""
        columns = list(columns) if columns is not None else list(self.columns)
        if self.format == "parquet":
            self.require(columns, what="streaming scorer")
            return _parquet_file(self.path).schema_arrow.empty_table().select(columns).to_pandas()
        for _, frame in self.iter_chunks(columns, chunk_rows=rows):
            return frame
        return pd.DataFrame(columns=columns)


def _parquet_file(path):
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow comes with pandas' Parquet support
        raise InputError("reading Parquet needs pyarrow: pip install pyarrow") from exc
    return pq.ParquetFile(str(path))


def csv_to_parquet(source: DataSource, dest: str | Path, *, columns: Sequence[str], chunk_rows: int) -> DataSource:
    """Copy a CSV's ``columns`` to a Parquet file with one row group per ``chunk_rows`` chunk.

    Used to shard a CSV: its chunks (``pd.read_csv(chunksize=chunk_rows)``) become the row groups,
    so the sharded scores equal the in-process CSV scores. Numeric columns are written as float64
    (integers up to 2**53 exactly; group and category labels are unchanged, ``1`` and ``1.0`` being
    one level), booleans as bool, anything else as strings. Never overwrites ``dest``.

    Raises
    ------
    InputError
        ``dest`` exists, or a column changes type between chunks (e.g. numbers then text).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    dest = Path(dest)
    if dest.exists():
        raise InputError(f"{dest} exists already; choose another path (nothing is overwritten)")
    writer = None
    try:
        for start, frame in _chunks(source, columns, chunk_rows=chunk_rows):
            arrays, fields = [], []
            for col in frame.columns:
                s = frame[col]
                if pd.api.types.is_bool_dtype(s):
                    arr = pa.array(s, type=pa.bool_(), from_pandas=True)
                elif pd.api.types.is_numeric_dtype(s):
                    arr = pa.array(s.to_numpy(dtype="float64"), type=pa.float64(), from_pandas=True)
                else:
                    text = s.astype(object).where(s.isna(), s.astype(str))
                    arr = pa.array(text, type=pa.string(), from_pandas=True)
                arrays.append(arr)
                fields.append(pa.field(str(col), arr.type))
            table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
            if writer is None:
                writer = pq.ParquetWriter(str(dest), table.schema)
            elif table.schema != writer.schema:
                changed = [f.name for f, g in zip(table.schema, writer.schema) if f.type != g.type]
                raise InputError(
                    f"CSV {source.path}: column(s) {changed} change type in the chunk starting at row "
                    f"{fmt_count(start)} (e.g. numbers, then text); clean the column or convert the file to "
                    "Parquet with explicit types"
                )
            writer.write_table(table, row_group_size=max(len(table), 1))
    except BaseException:
        if writer is not None:
            writer.close()
        dest.unlink(missing_ok=True)
        raise
    if writer is None:
        raise InputError(f"CSV {source.path} has no rows")
    writer.close()
    return DataSource.open(dest)


# ---------------------------------------------------------------------------- sample pass
def row_keys(rows: np.ndarray, seed: int) -> np.ndarray:
    """Seeded hash key of each input-row number: the SplitMix64 finaliser of ``row + seed·φ``.

    A bijection of uint64, so distinct rows get distinct keys (no ties); the rows with the k
    smallest keys are a uniform sample of k rows without replacement, the same for any chunking.

    Parameters
    ----------
    rows : int array of shape (m,)
    seed : int

    Returns
    -------
    ndarray of shape (m,), uint64
    """
    with np.errstate(over="ignore"):
        z = np.asarray(rows, dtype=np.int64).astype(_U64)
        z = z + _U64((int(seed) * 0x9E3779B97F4A7C15 + 0x9E3779B97F4A7C15) % 2**64)
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        return z ^ (z >> _U64(31))


@dataclass
class SamplePart:
    """Result of the sample pass over some rows; parts merge exactly (:func:`merge_samples`).

    Attributes
    ----------
    k : int
        Sample size asked for (``policy.aux.max_train_rows``).
    n_rows, n_missing : int
        Rows read; rows with a missing protected value.
    level_counts : dict or None
        Protected value -> row count; None once more than ``MAX_LEVELS`` distinct values were seen.
    level_examples : tuple
        Up to ``MAX_LEVELS + 1`` distinct protected values (kind inference when counts overflow).
    keys : ndarray of shape (m,), uint64
    rows : ndarray of shape (m,), int64
        Input-row numbers of the sampled rows (m ≤ k).
    X : ndarray of shape (m, d), float32
        Their encoded features.
    protected : ndarray of shape (m,), object
        Their raw protected values.
    """

    k: int
    n_rows: int = 0
    n_missing: int = 0
    level_counts: dict | None = field(default_factory=dict)
    level_examples: tuple = ()
    keys: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=_U64))
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    X: np.ndarray | None = None
    protected: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=object))

    def _add_levels(self, counts: dict) -> None:
        if self.level_counts is not None:
            for value, c in counts.items():
                self.level_counts[value] = self.level_counts.get(value, 0) + int(c)
            if len(self.level_counts) > MAX_LEVELS:
                self.level_examples = tuple(list(self.level_counts)[: MAX_LEVELS + 1])
                self.level_counts = None
        elif len(self.level_examples) <= MAX_LEVELS:
            seen = dict.fromkeys(self.level_examples)
            seen.update(dict.fromkeys(counts))
            self.level_examples = tuple(list(seen)[: MAX_LEVELS + 1])

    def _add_rows(self, keys, rows, X=None, protected=None) -> None:
        """Add rows (with their features, or keys only: :func:`key_pass`) and keep the bottom-k."""
        keys = np.concatenate([self.keys, keys])
        rows = np.concatenate([self.rows, rows])
        if X is not None:
            X = np.concatenate([self.X, X]) if self.X is not None else X
            protected = np.concatenate([self.protected, protected])
        if len(keys) > self.k:
            keep = np.argpartition(keys, self.k - 1)[: self.k]
            keys, rows = keys[keep], rows[keep]
            if X is not None:
                X, protected = X[keep], protected[keep]
        self.keys, self.rows = keys, rows
        if X is not None:
            self.X, self.protected = X, protected

    @property
    def threshold(self) -> int | None:
        """Largest kept key once the sample is full (rows with a larger key cannot enter)."""
        return int(self.keys.max()) if len(self.keys) >= self.k else None

    def sorted(self) -> "SamplePart":
        """The same sample with its rows in input order (the training order)."""
        order = np.argsort(self.rows, kind="stable")
        X, protected = (self.X[order], self.protected[order]) if self.X is not None else (None, self.protected)
        return SamplePart(self.k, self.n_rows, self.n_missing, self.level_counts, self.level_examples,
                          self.keys[order], self.rows[order], X, protected)


def key_pass(source: DataSource, *, policy: Policy, chunk_rows: int,
             row_groups: tuple[int, int] | None = None) -> SamplePart:
    """The protected column only: counts, levels and the bottom-k keys of the audited rows (no features).

    Round 1 of the sharded sample (``flows/shard.py``): the merged key parts' largest kept key
    (:attr:`SamplePart.threshold`) given to :func:`sample_pass` as ``max_key`` makes each shard return
    exactly its rows of the global sample, so k rows in all cross the network, not k per shard.
    """
    name = policy.protected
    part = SamplePart(k=policy.aux.max_train_rows)
    for start, frame in _chunks(source, [name], chunk_rows=chunk_rows, row_groups=row_groups):
        missing = _count_protected(part, frame[name])
        kept = np.flatnonzero(~missing)
        part._add_rows(row_keys(start + kept, policy.seed), (start + kept).astype(np.int64))
    return part.sorted()


def _count_protected(part: SamplePart, prot: pd.Series) -> np.ndarray:
    """Add a chunk's rows, missing values and levels to ``part``; return the missing mask (m,)."""
    if isinstance(prot.dtype, pd.CategoricalDtype):
        prot = prot.astype(object)
    missing = prot.isna().to_numpy()
    part.n_rows += len(prot)
    part.n_missing += int(missing.sum())
    if part.level_counts is not None or len(part.level_examples) <= MAX_LEVELS:
        part._add_levels(prot.value_counts(dropna=True, sort=False).to_dict())
    return missing


def sample_pass(source: DataSource, *, policy: Policy, feature_spec: FeatureSpec, chunk_rows: int,
                row_groups: tuple[int, int] | None = None, max_key: int | None = None) -> SamplePart:
    """One pass over ``source`` (or the row groups of a shard): counts and the bottom-k sample.

    Only the sample's candidate rows (key below the current k-th smallest) are encoded.
    ``max_key`` (from :func:`key_pass`) keeps only rows with a key at or below it.

    Returns
    -------
    SamplePart
        In input order (:meth:`SamplePart.sorted`).

    Raises
    ------
    InputError
        Missing columns, or a feature value the spec cannot encode in a sampled row (the message
        names the rows of the chunk).
    """
    name = policy.protected
    columns = _read_columns(feature_spec, name)
    part = SamplePart(k=policy.aux.max_train_rows)
    # candidates are buffered and compacted to the bottom-k every k/2 rows: O(candidates) copying,
    # at most 1.5 k rows held (the threshold between compactions is the last compaction's)
    pending: list[tuple] = []
    pending_n, threshold = 0, None
    for start, frame in _chunks(source, columns, chunk_rows=chunk_rows, row_groups=row_groups):
        n = len(frame)
        prot = frame[name]
        missing = _count_protected(part, prot)
        kept = np.flatnonzero(~missing)
        keys = row_keys(start + kept, policy.seed)
        if max_key is not None:
            cand = keys <= _U64(max_key)
            kept, keys = kept[cand], keys[cand]
        if threshold is not None:
            cand = keys < _U64(threshold)
            kept, keys = kept[cand], keys[cand]
        if len(kept) == 0:
            continue
        X = _encode(feature_spec, frame if len(kept) == n else frame.iloc[kept], source, start, n)
        values = prot.astype(object) if isinstance(prot.dtype, pd.CategoricalDtype) else prot
        pending.append((keys, (start + kept).astype(np.int64), X, values.to_numpy(dtype=object)[kept]))
        pending_n += len(kept)
        if pending_n >= max(part.k // 2, 1):
            part._add_rows(*(np.concatenate(a) for a in zip(*pending)))
            pending, pending_n, threshold = [], 0, part.threshold
    if pending:
        part._add_rows(*(np.concatenate(a) for a in zip(*pending)))
    return part.sorted()


def merge_samples(parts: Sequence[SamplePart]) -> SamplePart:
    """Exact merge of sample parts over disjoint rows: counts add, the bottom-k of the union is kept.

    Returns
    -------
    SamplePart
        In input order; equal to :func:`sample_pass` over all the parts' rows at once.
    """
    if not parts:
        raise InputError("no sample parts to merge (no shards)")
    out = SamplePart(k=parts[0].k)
    for p in parts:
        out.n_rows += p.n_rows
        out.n_missing += p.n_missing
        if p.level_counts is None:  # too many distinct values: keep examples only
            examples = [*(out.level_counts or {}), *out.level_examples, *p.level_examples]
            out.level_counts, out.level_examples = None, tuple(dict.fromkeys(examples))[: MAX_LEVELS + 1]
        else:
            out._add_levels(p.level_counts)
        if len(p.keys):
            out._add_rows(p.keys, p.rows, p.X, p.protected if p.X is not None else None)
    return out.sorted()


# ---------------------------------------------------------------------------- protected groups
@dataclass(frozen=True)
class ProtectedCodec:
    """The protected attribute's groups, fixed once for every chunk.

    Attributes
    ----------
    name : str
    kind : {"binary", "multiclass", "continuous"}
    groups : tuple of str
        Class labels in class-index order (as :func:`faux_checks.encode_protected` orders them
        on the whole column); for continuous c, the quartile bins of the training sample.
    mapping : dict
        Raw value -> class index (binary/multi-class).
    edges : tuple of float
        Inner quartile edges of the training sample (continuous).
    """

    name: str
    kind: str
    groups: tuple[str, ...]
    mapping: dict = field(default_factory=dict)
    edges: tuple[float, ...] = ()

    @classmethod
    def build(cls, sample: SamplePart, policy: Policy) -> "ProtectedCodec":
        """Groups from every distinct value of the file (sample pass), kind as the policy or inferred."""
        name = policy.protected
        distinct = list(sample.level_counts) if sample.level_counts is not None else list(sample.level_examples)
        if not distinct:
            raise InputError(f"protected attribute '{name}' has no non-missing values in {fmt_count(sample.n_rows)} rows")
        attr = encode_protected(pd.Series(distinct), name=name, kind=policy.protected_kind)
        if sample.level_counts is None and attr.kind != "continuous":
            raise InputError(f"protected attribute '{name}' has more than {MAX_LEVELS} distinct values; "
                             "declare protected_kind = \"continuous\" for a numeric attribute or group the levels first")
        if attr.kind == "continuous":
            values = pd.to_numeric(pd.Series(sample.protected), errors="coerce").to_numpy(dtype="float64")
            if not np.isfinite(values).any():
                raise InputError(f"protected attribute '{name}' declared continuous but the sample has no numbers")
            edges = tuple(float(e) for e in np.unique(np.quantile(values[np.isfinite(values)], [0.25, 0.5, 0.75])))
            bounds = (-np.inf, *edges, np.inf)
            groups = tuple(f"({lo:.4g}, {hi:.4g}]" for lo, hi in zip(bounds[:-1], bounds[1:]))
            return cls(name, "continuous", groups, edges=edges)
        mapping = {value: int(code) for value, code in zip(distinct, attr.values)}
        return cls(name, attr.kind, tuple(attr.groups), mapping=mapping)

    def encode(self, values: pd.Series) -> np.ndarray:
        """Class index (int64) or value (float64) of non-missing raw values, shape (m,)."""
        if self.kind == "continuous":
            return pd.to_numeric(values, errors="coerce").to_numpy(dtype="float64")
        inverse, uniques = pd.factorize(values.astype(object) if isinstance(values.dtype, pd.CategoricalDtype)
                                        else values)
        try:
            codes = np.array([self.mapping[u] for u in uniques], dtype=np.int64)
        except KeyError as exc:
            raise InputError(f"protected attribute '{self.name}' has the value {exc.args[0]!r}, which the sample pass "
                             "did not see; did the data file change between the two passes?") from None
        return codes[inverse] if len(codes) else np.empty(0, dtype=np.int64)

    def group_index(self, values: np.ndarray) -> np.ndarray:
        """Index into ``groups`` of each encoded value, shape (m,)."""
        if self.kind == "continuous":
            return np.searchsorted(np.asarray(self.edges), values, side="left").astype(np.int64)
        return np.asarray(values, dtype=np.int64)

    def attribute(self, values: np.ndarray) -> ProtectedAttribute:
        """A :class:`ProtectedAttribute` over ``values`` (for the library's helpers)."""
        groups = () if self.kind == "continuous" else self.groups
        return ProtectedAttribute(self.name, self.kind, values, groups, np.ones(len(values), dtype=bool), 0)


# ---------------------------------------------------------------------------- setup
@dataclass(frozen=True)
class ScoringPlan:
    """Everything the score pass needs besides the two models (picklable: sent to Dask workers).

    Attributes
    ----------
    policy : Policy
    feature_spec : FeatureSpec
    codec : ProtectedCodec
    output : TargetOutput
        The target's output form, resolved once on the sample.
    protected_mask, dx_dc : ndarray or None
        Direct term when the protected column is a target input (see ``check.direct_derivative``).
    ig_baseline : str or ndarray
    chunk_rows : int
    n_rows, n_missing_protected : int
        From the sample pass.
    aux : dict
        Auxiliary-model facts: quality, metric, kind, output space, groups, n_features,
        train_rows, epochs_run, given.
    """

    policy: Policy
    feature_spec: FeatureSpec
    codec: ProtectedCodec
    output: TargetOutput
    protected_mask: np.ndarray | None
    dx_dc: np.ndarray | None
    ig_baseline: Any
    chunk_rows: int
    n_rows: int
    n_missing_protected: int
    aux: dict

    @property
    def columns(self) -> list[str]:
        """Columns read by the score pass."""
        return _read_columns(self.feature_spec, self.policy.protected)

    def tester(self, target_model, aux_model: AuxiliaryModel) -> FAuxTester:
        """The FAuxTester used on every chunk."""
        faux = self.policy.faux
        return FAuxTester(target_model, aux_model, variant=faux.variant, output=self.output, ridge=faux.ridge,
                          protected_mask=self.protected_mask, dx_dc_direct=self.dx_dc,
                          ig_baseline=self.ig_baseline, ig_steps=faux.ig_steps, chunk_size=self.chunk_rows)

    def wrap_aux(self, module) -> AuxiliaryModel:
        """A loaded auxiliary network (e.g. the flow's TorchScript copy) as this plan's AuxiliaryModel."""
        return AuxiliaryModel.from_module(module, kind=self.aux["kind"], output_space=self.aux["output_space"],
                                          groups=self.aux["groups"], n_features=self.aux["n_features"])


def resolve_feature_spec(source: DataSource, policy: Policy, feature_spec: FeatureSpec | None,
                         *, chunk_rows: int) -> FeatureSpec:
    """The given spec (checked against the label) or a passthrough spec from the first chunk's dtypes."""
    required = [policy.protected] + ([policy.label] if policy.label else [])
    source.require([policy.protected], what="streaming scorer")
    if feature_spec is None:
        probe = source.probe_frame([c for c in source.columns], rows=min(chunk_rows, 65_536))
        return FeatureSpec.passthrough(probe, exclude=required)
    if policy.label and policy.label in feature_spec.source_columns:
        raise InputError(f"the label column '{policy.label}' is one of the target's input columns; "
                         "remove it from the feature spec")
    source.require(feature_spec.source_columns, what=f"FeatureSpec '{feature_spec.name}'")
    return feature_spec


def check_missing_protected(sample: SamplePart, policy: Policy) -> None:
    """Raise InputError (with the counts) for missing protected values under ``missing_protected = "error"``."""
    if sample.n_missing and policy.missing_protected == "error":
        raise InputError(
            f"protected attribute '{policy.protected}' has {fmt_count(sample.n_missing)} missing values in "
            f"{fmt_count(sample.n_rows)} rows; missing rows never join a group silently. Options: drop or impute "
            "them before the check, or set missing = \"drop\" in the policy to exclude them (the count is reported)"
        )


def prepare_scoring(target_model, sample: SamplePart, *, policy: Policy, feature_spec: FeatureSpec,
                    aux_model=None, chunk_rows: int, progress: bool = False) -> tuple[ScoringPlan, AuxiliaryModel]:
    """Fix the groups and output form, and train (or wrap) the auxiliary model once.

    Parameters
    ----------
    sample : SamplePart
        From :func:`sample_pass` / :func:`merge_samples`.
    aux_model : AuxiliaryModel or torch module, optional
        Given auxiliary model (raw outputs); trained on the sample when omitted.

    Returns
    -------
    (ScoringPlan, AuxiliaryModel)

    Raises
    ------
    InputError
        Missing protected values with ``missing_protected = "error"``, a single group, a model that
        does not accept the features, an ambiguous output form, too few rows to train on.
    """
    from .check import _check_model_accepts, _quality_on, direct_derivative

    name = policy.protected
    check_missing_protected(sample, policy)
    codec = ProtectedCodec.build(sample, policy)
    if sample.X is None or len(sample.rows) == 0:
        raise InputError(f"no audited rows in {fmt_count(sample.n_rows)} rows (every protected value is missing)")
    values = codec.encode(pd.Series(sample.protected))
    protected = codec.attribute(values)
    X = sample.X
    Xt = torch.from_numpy(X[: min(len(X), 256)])
    _check_model_accepts(target_model, Xt, feature_spec)
    output = resolve_output_form(target_model, Xt, TargetOutput(form=policy.target_output,
                                                                 target_class=policy.target_class))
    uses_direct = name in feature_spec.source_columns
    mask, dx_dc = (direct_derivative(feature_spec, protected) if uses_direct
                   else (np.zeros(X.shape[1], dtype=bool), None))
    X_aux = X[:, ~mask]
    settings = policy.aux
    if aux_model is None:
        aux = AuxiliaryModel(kind=protected.kind, hidden=settings.hidden, epochs=settings.epochs,
                             holdout=settings.holdout, output_space=settings.output_space, seed=policy.seed,
                             progress=progress)
        aux.fit(X_aux, values, groups=codec.groups if codec.kind != "continuous" else ())
        quality, metric = aux.quality_, aux.quality_metric_ + " (held-out rows of the training sample)"
    else:
        aux = aux_model if isinstance(aux_model, AuxiliaryModel) else AuxiliaryModel.from_module(
            aux_model, kind=protected.kind, output_space=settings.output_space, groups=protected.groups,
            n_features=X_aux.shape[1])
        quality, metric, _ = _quality_on(aux, X_aux, values, protected)
        metric = metric.replace("on the audit rows", "on the training sample")
    ig_baseline: Any = policy.faux.ig_baseline
    if policy.faux.variant == "ig" and ig_baseline == "mean":
        ig_baseline = X.astype(np.float64).mean(axis=0).astype(np.float32)
    plan = ScoringPlan(
        policy=policy, feature_spec=feature_spec, codec=codec, output=output,
        protected_mask=mask if uses_direct else None, dx_dc=dx_dc, ig_baseline=ig_baseline, chunk_rows=chunk_rows,
        n_rows=sample.n_rows, n_missing_protected=sample.n_missing,
        aux={"quality": float(quality), "metric": metric, "kind": protected.kind, "output_space": aux.output_space,
             "groups": tuple(protected.groups), "n_features": int(X_aux.shape[1]), "train_rows": int(len(X)),
             "epochs_run": getattr(aux, "epochs_run_", None), "given": aux_model is not None},
    )
    return plan, aux


# ---------------------------------------------------------------------------- score pass
@dataclass
class StreamCounts:
    """Running counts of the score pass; exact, and mergeable in any order (:meth:`merge`).

    Attributes
    ----------
    groups : tuple of str
    n, flagged, undefined : ndarray of shape (n_groups,), int64
        Audited rows, flagged rows (defined score > δ), undefined scores, per group.
    score_sums : list of list of float
        Per group, the sum of the defined scores of each chunk; the mean uses ``math.fsum`` (exactly
        rounded, so it does not depend on the order chunks or shards are merged in).
    n_rows, n_missing_protected, n_chunks : int
    first_score_at : float or None
        ``time.time()`` when the first chunk's scores were written.
    max_score : float
        Largest defined score (NaN when none).
    """

    groups: tuple[str, ...]
    n: np.ndarray
    flagged: np.ndarray
    undefined: np.ndarray
    score_sums: list
    n_rows: int = 0
    n_missing_protected: int = 0
    n_chunks: int = 0
    first_score_at: float | None = None
    max_score: float = float("nan")

    @classmethod
    def empty(cls, groups: Sequence[str]) -> "StreamCounts":
        g = len(groups)
        return cls(tuple(groups), np.zeros(g, np.int64), np.zeros(g, np.int64), np.zeros(g, np.int64),
                   [[] for _ in range(g)])

    def add(self, group_index: np.ndarray, scores: np.ndarray, undefined: np.ndarray, flagged: np.ndarray) -> None:
        """Add one chunk's audited rows (all arrays of shape (m,))."""
        g = len(self.groups)
        self.n += np.bincount(group_index, minlength=g)
        self.flagged += np.bincount(group_index, weights=flagged, minlength=g).astype(np.int64)
        self.undefined += np.bincount(group_index, weights=undefined, minlength=g).astype(np.int64)
        defined = ~undefined
        sums = np.bincount(group_index[defined], weights=scores[defined], minlength=g)
        counts = np.bincount(group_index[defined], minlength=g)
        for j in np.flatnonzero(counts):
            self.score_sums[j].append(float(sums[j]))
        if defined.any():
            top = float(scores[defined].max())
            self.max_score = top if not math.isfinite(self.max_score) else max(self.max_score, top)

    @classmethod
    def merge(cls, parts: Sequence["StreamCounts"]) -> "StreamCounts":
        """Counts over the union of the parts' rows (exact)."""
        if not parts:
            raise InputError("no counts to merge (no shards)")
        out = cls.empty(parts[0].groups)
        for p in parts:
            if p.groups != out.groups:
                raise InputError(f"shard counts disagree on the protected groups: {p.groups} vs {out.groups}")
            out.n += p.n
            out.flagged += p.flagged
            out.undefined += p.undefined
            for j in range(len(out.groups)):
                out.score_sums[j].extend(p.score_sums[j])
            out.n_rows += p.n_rows
            out.n_missing_protected += p.n_missing_protected
            out.n_chunks += p.n_chunks
            if p.first_score_at is not None:
                out.first_score_at = min(out.first_score_at or p.first_score_at, p.first_score_at)
            if math.isfinite(p.max_score):
                out.max_score = p.max_score if not math.isfinite(out.max_score) else max(out.max_score, p.max_score)
        return out

    @property
    def n_individuals(self) -> int:
        return int(self.n.sum())

    @property
    def n_flagged(self) -> int:
        return int(self.flagged.sum())

    @property
    def n_undefined(self) -> int:
        return int(self.undefined.sum())

    def by_group(self) -> pd.DataFrame:
        """Per group: ``n``, ``flagged``, ``flagged_fraction`` (over defined scores), ``undefined``, ``mean_score``."""
        defined = self.n - self.undefined
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(defined > 0, self.flagged / np.maximum(defined, 1), np.nan)
        mean = [math.fsum(s) / d if d else float("nan") for s, d in zip(self.score_sums, defined)]
        out = pd.DataFrame({"n": self.n, "flagged": self.flagged, "flagged_fraction": frac,
                            "undefined": self.undefined, "mean_score": mean},
                           index=pd.Index(self.groups, name="group"))
        return out[out["n"] > 0]


class ScoresWriter:
    """Appends score rows to ``path`` (Parquet by suffix ``.parquet``, else CSV) via a ``.partial`` file.

    The file appears under its name only on :meth:`commit`; :meth:`abort` removes the partial
    file, so a failed run never leaves a file that looks complete. Never overwrites.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.exists():
            raise InputError(f"{self.path} exists already; choose another output path (nothing is overwritten)")
        self.partial = self.path.with_name(self.path.name + ".partial")
        if self.partial.exists():
            raise InputError(f"{self.partial} exists (another run writing it?); remove it or choose another path")
        self.format = "parquet" if self.path.suffix == ".parquet" else "csv"
        self._writer = None
        self._header = True

    def write(self, rows, scores, flagged, status, group) -> None:
        """One chunk: arrays of shape (m,); ``flagged``/``group`` are ignored where status != 'scored'/audited."""
        scored = status == "scored"
        if self.format == "parquet":
            self.write_table(_score_table(rows, scores, flagged, status, group))
            return
        frame = pd.DataFrame({"row": rows, "lic_score": scores,
                              "flagged": pd.array(np.where(scored, flagged, False), dtype="boolean"),
                              "status": status, "group": group})
        frame.loc[~scored, "flagged"] = pd.NA
        frame.to_csv(self.partial, mode="a", header=self._header, index=False)
        self._header = False

    def write_table(self, table) -> None:
        """Append an Arrow table with the score columns."""
        if self.format == "csv":
            frame = table.to_pandas()
            frame["flagged"] = frame["flagged"].astype("boolean")
            frame.to_csv(self.partial, mode="a", header=self._header, index=False)
            self._header = False
            return
        import pyarrow.parquet as pq

        if self._writer is None:
            self._writer = pq.ParquetWriter(str(self.partial), table.schema)
        self._writer.write_table(table, row_group_size=max(len(table), 1))

    def commit(self) -> Path:
        if self._writer is not None:
            self._writer.close()
        elif self.format == "parquet":  # no rows: still a valid (empty) file
            import pyarrow.parquet as pq

            pq.write_table(_score_table(*[np.empty(0)] * 5), str(self.partial))
        if not self.partial.exists():
            self.partial.write_text(",".join(SCORE_COLUMNS) + "\n")
        self.partial.replace(self.path)
        return self.path

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # pragma: no cover - best effort on the way out
                pass
        self.partial.unlink(missing_ok=True)


def _score_table(rows, scores, flagged, status, group):
    import pyarrow as pa

    status = np.asarray(status, dtype=object)
    scored = status == "scored"
    audited = status != "not_audited"
    return pa.Table.from_arrays(
        [pa.array(np.asarray(rows, dtype=np.int64)), pa.array(np.asarray(scores, dtype=np.float64)),
         pa.array(np.asarray(flagged, dtype=bool), mask=~scored), pa.array(status, type=pa.string()),
         pa.array(np.asarray(group, dtype=object), type=pa.string(), mask=~audited)],
        names=list(SCORE_COLUMNS))


def score_pass(target_model, aux_model: AuxiliaryModel, source: DataSource, plan: ScoringPlan, writer: ScoresWriter,
               *, row_groups: tuple[int, int] | None = None, progress: bool = False) -> StreamCounts:
    """Score every row of ``source`` (or a shard's row groups) chunk by chunk; write and count.

    Returns
    -------
    StreamCounts
        Of the rows read.

    Raises
    ------
    InputError
        A feature value the spec cannot encode (names the chunk's rows), a missing protected value
        with ``missing_protected = "error"``, and FAuxTester's own input errors.
    """
    tester = plan.tester(target_model, aux_model)
    codec, delta = plan.codec, plan.policy.faux.delta
    counts = StreamCounts.empty(codec.groups)
    names = np.asarray(codec.groups, dtype=object)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=source.n_rows, desc="fAux scores", unit="row", unit_scale=True, leave=False)
    for start, frame in _chunks(source, plan.columns, chunk_rows=plan.chunk_rows, row_groups=row_groups):
        n = len(frame)
        prot = frame[codec.name]
        missing = prot.isna().to_numpy()
        if missing.any() and plan.policy.missing_protected == "error":
            raise InputError(f"protected attribute '{codec.name}' has {fmt_count(missing.sum())} missing values in rows "
                             f"{fmt_count(start)}-{fmt_count(start + n - 1)}; drop or impute them, or set missing = \"drop\"")
        kept = np.flatnonzero(~missing)
        scores = np.full(n, np.nan)
        flagged = np.zeros(n, dtype=bool)
        status = np.full(n, "not_audited", dtype=object)
        group = np.full(n, None, dtype=object)
        if len(kept):
            sub = frame if len(kept) == n else frame.iloc[kept]
            X = _encode(plan.feature_spec, sub, source, start, n)
            idx = codec.group_index(codec.encode(sub[codec.name]))
            lic = tester.evaluate(X, evidence=False)
            hit = lic.flagged(delta)
            counts.add(idx, lic.scores, lic.undefined, hit)
            scores[kept] = lic.scores
            flagged[kept] = hit
            status[kept] = np.where(lic.undefined, "undefined", "scored")
            group[kept] = names[idx]
        counts.n_rows += n
        counts.n_missing_protected += int(missing.sum())
        counts.n_chunks += 1
        writer.write(np.arange(start, start + n, dtype=np.int64), scores, flagged, status, group)
        if counts.first_score_at is None:
            counts.first_score_at = time.time()
        if bar is not None:
            bar.update(n)
    if bar is not None:
        bar.close()
    return counts


def merge_score_parts(part_paths: Sequence[str | Path], out_path: str | Path) -> Path:
    """Concatenate shard part files (Parquet, in shard order) into one scores file, row group by row group."""
    import pyarrow.parquet as pq

    writer = ScoresWriter(out_path)
    try:
        for part in part_paths:
            pf = pq.ParquetFile(str(part))
            for rg in range(pf.metadata.num_row_groups):
                writer.write_table(pf.read_row_group(rg))
        return writer.commit()
    except BaseException:
        writer.abort()
        raise


# ---------------------------------------------------------------------------- summary
@dataclass(frozen=True)
class StreamSummary:
    """Outcome of a streaming (or sharded) fAux run, computed from exact running counts.

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
        Rules 1-3 of :mod:`faux_checks.check` (aux quality, undefined fraction, flagged fraction);
        a policy with an enabled *gating* baseline tester is ``undecided`` (not run here).
    reasons : list of str
    flagged_fraction : float
        Flagged rows over rows with a defined score.
    max_flagged_fraction, delta : float
    n_rows, n_individuals, n_undefined, n_flagged, n_missing_protected : int
        Rows read; audited rows; undefined scores; flagged rows; rows without a protected value.
    by_group : DataFrame
        ``n``, ``flagged``, ``flagged_fraction``, ``undefined``, ``mean_score`` per protected group.
    aux_quality : float
    aux_quality_metric : str
    out_path : str
        The scores file: one row per input row, in input order.
    timings : dict
        Seconds: ``sample``, ``aux``, ``score``, ``merge``, ``total``, ``first_score`` (start to the
        first written score).
    notes : list of str
        How this run differs from ``run_check`` (see module docstring).
    provenance : dict
    """

    decision: str
    reasons: list[str]
    flagged_fraction: float
    max_flagged_fraction: float
    delta: float
    n_rows: int
    n_individuals: int
    n_undefined: int
    n_flagged: int
    n_missing_protected: int
    by_group: pd.DataFrame
    aux_quality: float
    aux_quality_metric: str
    out_path: str
    timings: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 passed, 1 failed, 2 undecided (DESIGN.md contract)."""
        from .check import EXIT_CODES

        return EXIT_CODES[self.decision]

    def __repr__(self) -> str:
        from .check import summary_line

        return summary_line(self)

    def to_dict(self) -> dict:
        """JSON-ready dict; NaN becomes None."""
        from .provenance import jsonable

        return jsonable({
            "decision": self.decision, "exit_code": self.exit_code, "reasons": self.reasons,
            "flagged_fraction": self.flagged_fraction, "max_flagged_fraction": self.max_flagged_fraction,
            "delta": self.delta, "n_rows": self.n_rows, "n_individuals": self.n_individuals,
            "n_undefined": self.n_undefined, "n_flagged": self.n_flagged,
            "n_missing_protected": self.n_missing_protected,
            "by_group": self.by_group.reset_index().to_dict(orient="records"),
            "aux_quality": self.aux_quality, "aux_quality_metric": self.aux_quality_metric,
            "out_path": self.out_path, "timings": self.timings, "notes": self.notes, "provenance": self.provenance,
        })


def summarize(counts: StreamCounts, plan: ScoringPlan, *, source: DataSource, out_path: str | Path,
              timings: dict | None = None, model_info: dict | None = None, extra_notes: Sequence[str] = ()) -> StreamSummary:
    """Decide from the merged counts (same rule order as ``run_check``, without baseline testers)."""
    from .provenance import package_versions, utc_now

    policy, faux = plan.policy, plan.policy.faux
    n, n_undefined, n_flagged = counts.n_individuals, counts.n_undefined, counts.n_flagged
    if counts.n_rows != plan.n_rows or counts.n_missing_protected != plan.n_missing_protected:
        raise InputError(
            f"the score pass read {fmt_count(counts.n_rows)} rows ({fmt_count(counts.n_missing_protected)} without a "
            f"protected value) but the sample pass {fmt_count(plan.n_rows)} ({fmt_count(plan.n_missing_protected)}); "
            "the data file changed during the run"
        )
    n_defined = n - n_undefined
    flagged_fraction = n_flagged / n_defined if n_defined else float("nan")
    aux_quality = plan.aux["quality"]
    reasons: list[str] = []
    gating = sorted(name for name, t in policy.testers.items() if t.enabled and t.gating)
    if not np.isfinite(aux_quality) or aux_quality < policy.min_aux_quality:
        decision = "undecided"
        reasons.append(f"auxiliary model too weak: {plan.aux['metric']} {aux_quality:.3f} < min_aux_quality "
                       f"{policy.min_aux_quality:g}; fAux cannot estimate how the features depend on the protected attribute")
    elif n == 0:
        decision = "undecided"
        reasons.append("no audited rows")
    elif n_undefined / n > faux.max_undefined_fraction:
        decision = "undecided"
        reasons.append(f"{fmt_count(n_undefined)} of {fmt_count(n)} LIC scores are undefined ({n_undefined / n:.2%} > "
                       f"max_undefined_fraction {faux.max_undefined_fraction:.2%})")
    elif flagged_fraction > faux.max_flagged_fraction:
        decision = "failed"
        reasons.append(f"flagged fraction {flagged_fraction:.2%} > max_flagged_fraction {faux.max_flagged_fraction:.2%} "
                       f"(LIC score > δ = {faux.delta:g}, {fmt_count(n_flagged)} of {fmt_count(n_defined)} individuals)")
    elif gating:
        decision = "undecided"
        reasons.append(f"the policy's gating baseline tester(s) {gating} are not run by the streaming scorer; "
                       "run `faux-checks check` on a sample for them, or make them non-gating")
    else:
        decision = "passed"
        reasons.append(f"flagged fraction {flagged_fraction:.2%} <= max_flagged_fraction "
                       f"{faux.max_flagged_fraction:.2%} at δ = {faux.delta:g}")
    if n_undefined:
        reasons.append(f"{fmt_count(n_undefined)} individuals have an undefined score (zero or degenerate aux gradient)")
    if counts.n_missing_protected:
        reasons.append(f"{fmt_count(counts.n_missing_protected)} rows with a missing protected value were not audited "
                       "(policy)")
    notes = [f"aux model {'given' if plan.aux['given'] else 'trained'} on a bottom-k sample of "
             f"{fmt_count(plan.aux['train_rows'])} rows (seeded hash of the row number, seed {policy.seed})",
             "every row is scored: policy.max_rows is not applied" if policy.max_rows is not None else None,
             "baseline testers and per-feature evidence are not computed by the streaming scorer"
             if any(t.enabled for t in policy.testers.values()) else "per-feature evidence is not computed",
             "continuous protected attribute grouped by the training sample's quartiles"
             if plan.codec.kind == "continuous" else None,
             "IG baseline = mean of the training sample" if isinstance(plan.ig_baseline, np.ndarray) else None,
             *extra_notes]
    path = Path(source.path)
    stat = path.stat() if path.exists() else None
    provenance = {
        "checked_at": utc_now(),
        "seed": policy.seed, "policy_name": policy.name, "policy_sha256": policy.sha256(),
        "policy": policy.model_dump(mode="json"), "data_path": str(path), "data_format": source.format,
        "data_bytes": stat.st_size if stat else None,
        "data_mtime": _dt.datetime.fromtimestamp(stat.st_mtime, _dt.timezone.utc).isoformat() if stat else None,
        "n_input_rows": counts.n_rows, "chunk_rows": plan.chunk_rows, "n_chunks": counts.n_chunks,
        "feature_spec": plan.feature_spec.name, "n_features": plan.feature_spec.n_features,
        "variant": faux.variant, "target_output": plan.output.form, "target_class": plan.output.target_class,
        "aux_output_space": plan.aux["output_space"], "aux_epochs_run": plan.aux["epochs_run"],
        "aux_given": plan.aux["given"], "aux_train_rows": plan.aux["train_rows"], "protected_kind": plan.codec.kind,
        "groups": list(plan.codec.groups), "max_score": counts.max_score, "first_score_at": counts.first_score_at,
        "packages": package_versions(),
        **(model_info or {}),
    }
    return StreamSummary(
        decision=decision, reasons=reasons, flagged_fraction=flagged_fraction,
        max_flagged_fraction=faux.max_flagged_fraction, delta=faux.delta, n_rows=counts.n_rows,
        n_individuals=n, n_undefined=n_undefined, n_flagged=n_flagged,
        n_missing_protected=counts.n_missing_protected, by_group=counts.by_group(), aux_quality=aux_quality,
        aux_quality_metric=plan.aux["metric"], out_path=str(out_path), timings=dict(timings or {}),
        notes=[x for x in notes if x], provenance=provenance,
    )


# ---------------------------------------------------------------------------- one process
def score_stream(
    target_model,
    source_path: str | Path,
    *,
    policy: Policy,
    out_path: str | Path,
    feature_spec: FeatureSpec | None = None,
    aux_model=None,
    chunk_rows: int | None = None,
    progress: bool = False,
    model_info: dict | None = None,
) -> StreamSummary:
    """Score every row of a large Parquet/CSV file with fAux in bounded memory, in this process.

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
        Maps the encoded features (n, d) to the declared output (policy ``target_output``).
    source_path : str or Path
        ``.parquet`` (read by row group) or CSV (``pd.read_csv(chunksize=...)``). Not modified.
    policy : Policy
        δ, limits, aux settings, seed; ``policy.scale.chunk_rows`` is the default chunk size.
    out_path : str or Path
        New scores file (``.parquet`` or CSV): ``row``, ``lic_score``, ``flagged``, ``status``
        (``scored`` / ``undefined`` / ``not_audited``), ``group``; one row per input row, in input
        order. Never overwritten; written under ``<name>.partial`` until the run succeeds.
    feature_spec : FeatureSpec, optional
        Without it the numeric columns of the first chunk are used as they are (minus protected
        and label).
    aux_model : AuxiliaryModel or torch module, optional
        Given auxiliary model; trained once on the bottom-k sample when omitted (module docstring).
    chunk_rows : int, optional
        Rows per chunk; bounds memory (default ``policy.scale.chunk_rows``).
    progress : bool
        Progress bars (aux training, scores).
    model_info : dict, optional
        Added to the provenance.

    Returns
    -------
    StreamSummary

    Raises
    ------
    InputError
        As :func:`faux_checks.check.run_check`, plus an existing ``out_path``.

    Notes
    -----
    fAux: Castiglione et al. 2022, eq. 9-10 (arXiv 2210.06288). Peak memory ≈ the training sample
    (``max_train_rows`` × d float32) + one chunk's gradients and Jacobians.
    """
    t0 = time.perf_counter()
    t_wall = time.time()
    chunk_rows = int(chunk_rows or policy.scale.chunk_rows)
    if Path(out_path).exists():
        raise InputError(f"{out_path} exists already; choose another output path (nothing is overwritten)")
    source = DataSource.open(source_path)
    spec = resolve_feature_spec(source, policy, feature_spec, chunk_rows=chunk_rows)
    sample = sample_pass(source, policy=policy, feature_spec=spec, chunk_rows=chunk_rows)
    t1 = time.perf_counter()
    plan, aux = prepare_scoring(target_model, sample, policy=policy, feature_spec=spec, aux_model=aux_model,
                                chunk_rows=chunk_rows, progress=progress)
    del sample
    t2 = time.perf_counter()
    writer = ScoresWriter(out_path)
    try:
        counts = score_pass(target_model, aux, source, plan, writer, progress=progress)
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    t3 = time.perf_counter()
    timings = {"sample": t1 - t0, "aux": t2 - t1, "score": t3 - t2, "merge": 0.0, "total": t3 - t0,
               "first_score": (counts.first_score_at - t_wall) if counts.first_score_at else None}
    return summarize(counts, plan, source=source, out_path=out_path, timings=timings,
                     model_info={"workers": 0, **(model_info or {})})


# ---------------------------------------------------------------------------- helpers
def _chunks(source: DataSource, columns, *, chunk_rows: int, row_groups=None) -> Iterator[tuple[int, pd.DataFrame]]:
    """``source.iter_chunks`` that closes the file as soon as the caller stops (even on an error)."""
    with contextlib.closing(source.iter_chunks(columns, chunk_rows=chunk_rows, row_groups=row_groups)) as chunks:
        yield from chunks


def _read_columns(spec: FeatureSpec, protected: str) -> list[str]:
    return list(dict.fromkeys([*spec.source_columns, protected]))


def _encode(spec: FeatureSpec, frame: pd.DataFrame, source: DataSource, start: int, n: int) -> np.ndarray:
    """``spec.encode(frame)``, with the chunk's rows in any error message.

    All-numeric specs on int/float columns without missing values take one vectorised step with
    the same float64 arithmetic as :meth:`FeatureSpec.encode` (so the same float32 result);
    anything else, and every error, goes through ``spec.encode`` itself.
    """
    fast = _encode_numeric(spec, frame)
    if fast is not None:
        return fast
    try:
        return spec.encode(frame)
    except InputError as exc:
        raise InputError(f"{source.path}, rows {fmt_count(start)}-{fmt_count(start + n - 1)}: {exc}") from None


def _encode_numeric(spec: FeatureSpec, frame: pd.DataFrame) -> np.ndarray | None:
    if any(c.kind != "numeric" for c in spec.columns):
        return None
    names = spec.source_columns
    if any(not (pd.api.types.is_integer_dtype(frame[c]) or pd.api.types.is_float_dtype(frame[c])) for c in names):
        return None
    values = frame[names].to_numpy(dtype=np.float64)                     # (m, d)
    if np.isnan(values).any():
        return None                                                        # spec.encode names the column
    mean = np.array([c.mean for c in spec.columns], dtype=np.float64)
    scale = np.array([c.std if c.std > 0 else 1.0 for c in spec.columns], dtype=np.float64)
    return ((values - mean) / scale).astype(np.float32)


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (``ru_maxrss``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
