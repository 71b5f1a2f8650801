"""The data source of the streaming scorer: a Parquet or CSV file read in chunks, never whole.

Also the per-chunk encoding (:func:`encode_chunk`) and the CSV-to-Parquet copy that lets a CSV be
sharded by row groups (:func:`csv_to_parquet`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Generator, Iterator, Sequence

import numpy as np
import pandas as pd

from ..._validation import fmt_count
from ...errors import InputError
from ...inputs.io import (MalformedRows, check_header, check_thousands, csv_field_count_errors, csv_number_marks,
                          sniff_sep)
from ...inputs.tabular import FeatureSpec

__all__ = ["DataSource", "check_rows", "columns_to_read", "csv_to_parquet", "encode_chunk", "read_chunks"]


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
    sep : str
        The CSV delimiter (given, or sniffed from the head: :func:`faux_checks.inputs.io.sniff_sep`).
    thousands : str or None
        The CSV numbers' thousands mark (CLI ``--thousands``; pandas ``read_csv(thousands=...)``), None for none.
    decimal : str
        The CSV numbers' decimal mark (CLI ``--decimal``, else sniffed: :func:`faux_checks.inputs.io.csv_number_marks`).
    """

    path: str
    format: str
    columns: tuple[str, ...]
    row_group_rows: tuple[int, ...] = ()
    sep: str = ","
    thousands: str | None = None
    decimal: str = "."

    @classmethod
    def open(cls, path: str | Path, *, sep: str | None = None, thousands: str | None = None,
             decimal: str | None = None) -> "DataSource":
        """Read the file's schema (Parquet metadata or the CSV header), not its rows.

        Raises
        ------
        InputError
            Missing or unreadable file, a repeated, empty or whitespace-ambiguous column name
            (:func:`faux_checks.inputs.io.check_header`), or a ``thousands`` mark that is not one character,
            a digit or the decimal mark, a decimal mark other than ``,`` and ``.``
            (:func:`faux_checks.inputs.io.csv_number_marks`; Parquet ignores both).
        """
        path = Path(path)
        if not path.is_file():
            raise InputError(f"data file {path} does not exist")
        delimiter = sniff_sep(path, sep) if path.suffix != ".parquet" else ","
        mark, point = (csv_number_marks(path, delimiter, thousands, decimal) if path.suffix != ".parquet"
                       else (None, "."))
        check_header(path, delimiter)
        try:
            if path.suffix == ".parquet":
                pf = _parquet_file(path)
                meta = pf.metadata
                rows = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
                return cls(str(path), "parquet", tuple(pf.schema_arrow.names), rows)
            header = pd.read_csv(path, nrows=0, skipinitialspace=True, sep=delimiter)
            return cls(str(path), "csv", tuple(map(str, header.columns)), sep=delimiter, thousands=mark,
                       decimal=point)
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
                    row_groups: tuple[int, int] | None = None) -> Generator[tuple[int, pd.DataFrame], None, None]:
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
                with pd.read_csv(self.path, chunksize=chunk_rows, skipinitialspace=True, usecols=columns,
                                 sep=self.sep, thousands=self.thousands, decimal=self.decimal) as reader:
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
        for start, frame in read_chunks(source, columns, chunk_rows=chunk_rows):
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
                changed = [f.name for f, g in zip(table.schema, writer.schema, strict=False) if f.type != g.type]
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


def check_rows(source: DataSource, spec: FeatureSpec, *, chunk_rows: int = 65_536) -> None:
    """Refuse a file with malformed rows before anything is scored, naming the first rows and the count.

    Three checks, in this order, each over the whole file (so the first rows named do not depend on
    the chunk size or on how many workers score the file):

    1. CSV: every record has the header's field count (:func:`faux_checks.inputs.io.csv_field_count_errors`;
       pandas would read a truncated line as missing values, e.g. a missing protected value).
    2. CSV read with a thousands mark: no value of the spec's columns is misread by it
       (:func:`faux_checks.inputs.io.check_thousands`: ``12,34`` is refused, not read as 1234).
    3. Every value of the spec's numeric columns parses as a number (pandas' missing-value markers
       are missing, not malformed). Parquet columns stored as numbers are not read.

    Raises
    ------
    InputError
        ``data file ... has N malformed rows of M (first 5 shown): row 7: 9 fields, expected 15
        (line 9); row 12: column 'age' has 'abc', not a number ...``
    """
    fields = csv_field_count_errors(source.path, source.sep) if source.format == "csv" else MalformedRows(source.path)
    if source.format == "csv" and not fields.count:     # values the thousands mark would misread (12,34 -> 1234)
        check_thousands(source.path, source.sep, source.thousands, source.decimal, columns=spec.source_columns,
                        chunk_rows=chunk_rows)
    numeric = [c.name for c in spec.columns if c.kind == "numeric"]
    if source.format == "parquet":
        import pyarrow as pa

        schema = _parquet_file(source.path).schema_arrow
        numeric = [c for c in numeric if not (pa.types.is_integer(schema.field(c).type)
                                              or pa.types.is_floating(schema.field(c).type)
                                              or pa.types.is_boolean(schema.field(c).type))]
    if not numeric:
        if fields.count:
            raise fields.error()
        return
    bad = MalformedRows(source.path)
    try:
        _scan_numbers(source, numeric, chunk_rows, bad)
    except InputError:
        if fields.count:   # pandas stops on a long record: the field counts name it
            raise fields.error() from None
        raise
    bad = fields.merge(bad)   # both kinds named, each row counted once
    if bad.count:
        raise bad.error()


def _scan_numbers(source: DataSource, numeric: list[str], chunk_rows: int, bad: MalformedRows) -> None:
    """Add to ``bad`` every row with a value of a ``numeric`` column that does not parse as a number."""
    for start, frame in _raw_chunks(source, numeric, chunk_rows):
        problem: np.ndarray = np.full(len(frame), None, dtype=object)
        for col in numeric:
            raw = frame[col]
            if pd.api.types.is_numeric_dtype(raw):
                continue
            wrong = (pd.to_numeric(raw, errors="coerce").isna() & raw.notna()).to_numpy()
            for i in np.flatnonzero(wrong & (problem == None)):  # noqa: E711 - elementwise
                problem[i] = f"column '{col}' has {raw.iloc[i]!r}, not a number"
        for i in np.flatnonzero(problem != None):  # noqa: E711
            bad.add(start + int(i), problem[i], "a value that is not a number")
        bad.n_rows = start + len(frame)


def _raw_chunks(source: DataSource, columns: list[str], chunk_rows: int):
    """Chunks of ``columns`` as pandas reads them: a column with a value that is not a number comes as text."""
    if source.format == "parquet":
        yield from read_chunks(source, columns, chunk_rows=chunk_rows)
        return
    try:
        with pd.read_csv(source.path, chunksize=chunk_rows, skipinitialspace=True, usecols=columns,
                         sep=source.sep, thousands=source.thousands, decimal=source.decimal) as reader:
            start = 0
            for frame in reader:
                yield start, frame
                start += len(frame)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read data file {source.path}: {type(exc).__name__}: {exc}") from exc


def read_chunks(source: DataSource, columns, *, chunk_rows: int, row_groups=None) -> Iterator[tuple[int, pd.DataFrame]]:
    """``source.iter_chunks`` that closes the file as soon as the caller stops (even on an error)."""
    with contextlib.closing(source.iter_chunks(columns, chunk_rows=chunk_rows, row_groups=row_groups)) as chunks:
        yield from chunks


def columns_to_read(spec: FeatureSpec, protected: str) -> list[str]:
    """The spec's source columns and the protected column, once each, in that order."""
    return list(dict.fromkeys([*spec.source_columns, protected]))


def encode_chunk(spec: FeatureSpec, frame: pd.DataFrame, source: DataSource, start: int, n: int) -> np.ndarray:
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
