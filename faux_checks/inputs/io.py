"""Reading audit data and writing per-row outputs (never overwriting what a user has)."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import check_column_names, fmt_count
from ..errors import InputError
from .number_marks import ThousandsCheck, decimal_mark, sniff_decimal

__all__ = ["MalformedRows", "check_header", "check_output_path", "check_thousands", "csv_field_count_errors",
           "csv_number_marks", "read_table", "sniff_sep", "write_scores"]

#: Malformed rows named in an error message (the count covers all of them).
SHOWN_ROWS = 5


@dataclass
class MalformedRows:
    """Rows of a data file that cannot be read as its header says: the first few named, all counted.

    Attributes
    ----------
    path : str
    n_rows : int
        Data rows read (header excluded, blank lines skipped as pandas skips them).
    count : int
        Malformed rows (a row with several problems counts once).
    first : list of (int, str)
        ``(row, problem)`` for the first :data:`SHOWN_ROWS` malformed rows, by row number; ``row``
        is the 0-based data-row number, as in the scores file's ``row`` column.
    """

    path: str
    n_rows: int = 0
    count: int = 0
    first: list = field(default_factory=list)
    #: rows per kind of problem (e.g. ``"a wrong field count"``), when a scan says (:meth:`merge`)
    kinds: dict = field(default_factory=dict)
    rows: set = field(default_factory=set, repr=False)

    def add(self, row: int, problem: str, kind: str | None = None) -> None:
        """Record one problem of one row (rows arrive in increasing order within one scan)."""
        self.count += 1
        self.rows.add(int(row))
        if kind is not None:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if len(self.first) < SHOWN_ROWS:
            self.first.append((int(row), problem))

    def merge(self, other: "MalformedRows") -> "MalformedRows":
        """This scan's rows and ``other``'s: a row with problems in both counts once, the first rows by number
        are shown, and the error names every kind of problem with its rows ("1 malformed
        rows" named only the first kind)."""
        rows = self.rows | other.rows
        first = sorted({row: problem for row, problem in reversed(self.first + other.first)}.items())[:SHOWN_ROWS]
        kinds = dict(self.kinds)
        for kind, n in other.kinds.items():
            kinds[kind] = kinds.get(kind, 0) + n
        return MalformedRows(self.path, n_rows=max(self.n_rows, other.n_rows), count=len(rows), first=first,
                             kinds=kinds, rows=rows)

    def error(self) -> InputError:
        """The InputError naming the first rows and the count (call only when ``count``)."""
        shown = "; ".join(f"row {fmt_count(r)}: {p}" for r, p in self.first)
        more = f" (first {len(self.first)} shown)" if self.count > len(self.first) else ""
        kinds = (" (" + ", ".join(f"{fmt_count(n)} with {kind}" for kind, n in self.kinds.items()) + ")"
                 if len(self.kinds) > 1 else "")
        return InputError(
            f"data file {self.path} has {fmt_count(self.count)} malformed rows of {fmt_count(self.n_rows)}{kinds}{more}: "
            f"{shown}. Rows are numbered from 0 after the header, as in the scores file; nothing was scored. "
            "Fix or remove these lines (a truncated or unquoted line is never read as a missing value)"
        )


def _open_text(path: Path):
    suffix = path.suffix.lower()
    if suffix == ".gz":
        import gzip
        return gzip.open(path, "rt", newline="", encoding="utf-8")
    if suffix == ".bz2":
        import bz2
        return bz2.open(path, "rt", newline="", encoding="utf-8")
    if suffix == ".xz":
        import lzma
        return lzma.open(path, "rt", newline="", encoding="utf-8")
    if suffix in (".zip", ".zst", ".tar"):
        return None
    return open(path, newline="", encoding="utf-8")


#: Delimiters the sniffer chooses among (bank-marketing's CSV is ';'-separated).
SNIFF_DELIMITERS = ",;\t|"
#: Characters of the file's head the sniffer reads.
SNIFF_BYTES = 64 * 1024


def sniff_sep(path: str | Path, sep: str | None = None) -> str:
    """The field delimiter of a CSV file: ``sep`` when given, else :class:`csv.Sniffer` on the file's head.

    The sniffer chooses among :data:`SNIFF_DELIMITERS` from the first :data:`SNIFF_BYTES` characters (whole lines);
    a head it cannot read (one column, a compressed archive) is ``","``, the format's default.

    Raises
    ------
    InputError
        ``sep`` is not one character (the value named).
    """
    if sep is not None:
        sep = {"\\t": "\t", "tab": "\t"}.get(sep, sep)
        if len(sep) != 1:
            raise InputError(f"--sep {sep!r} is not one character; give the delimiter itself, e.g. --sep ';' or --sep tab")
        return sep
    head = _head(Path(path))
    if not head:
        return ","
    try:
        return csv.Sniffer().sniff(head, delimiters=SNIFF_DELIMITERS).delimiter
    except csv.Error:
        return ","


def _head(path: Path) -> str:
    """The first :data:`SNIFF_BYTES` characters of a CSV file, whole lines; ``""`` for a head that cannot be read."""
    handle = _open_text(path)
    if handle is None:
        return ""
    try:
        with handle:
            head = handle.read(SNIFF_BYTES)
    except (OSError, UnicodeDecodeError):
        return ""
    if len(head) == SNIFF_BYTES and "\n" in head:
        head = head[: head.rindex("\n")]
    return head


def csv_number_marks(path: str | Path, sep: str, thousands: str | None = None,
                     decimal: str | None = None) -> tuple[str | None, str]:
    """The ``(thousands, decimal)`` marks a CSV file's numbers are read with (CLI ``--thousands``, ``--decimal``).

    Given marks are checked (:func:`thousands_mark`, :func:`faux_checks.inputs.number_marks.decimal_mark`); with
    neither given, the decimal mark is sniffed from the file's head together with its delimiter ``sep``
    (:func:`faux_checks.inputs.number_marks.sniff_decimal`: a ``;``-separated file of ``0,189`` reads with
    ``","``), else ``"."``.

    Raises
    ------
    InputError
        A mark that is not one (the value named), or the same mark given for thousands and decimals.
    """
    point = decimal_mark(decimal, thousands)
    mark = thousands_mark(thousands, sep, point)
    if point is None and mark is None:
        point = sniff_decimal(_head(Path(path)), sep)
    return mark, point or "."


def thousands_mark(thousands: str | None, sep: str, decimal: str | None = None) -> str | None:
    """The thousands mark of a CSV file's numbers (CLI ``--thousands``), checked against its delimiter ``sep``.

    Passed to pandas as ``read_csv(thousands=...)``, so ``1,234.5`` is read as the number 1234.5. The mark may
    equal the delimiter ``sep`` when the marked numbers are quoted (``"1,234.5"`` in a ``,``-separated file, as
    pandas and spreadsheets write them: pandas reads the quoted field as one number, checked in
    ``tests/inputs/test_misread_columns.py``); an unquoted ``1,234`` there is two fields, and the row is refused by
    the field-count check (:func:`csv_field_count_errors`). None leaves the numbers as pandas reads them (a
    column holding ``1,234.5`` is text, and refused without a feature spec:
    :meth:`faux_checks.inputs.tabular.FeatureSpec.passthrough`). ``.`` marks thousands only with ``decimal``
    ``","`` (``1.234,5``). Every marked value is checked for groups of 3 digits when the file is read
    (:func:`check_thousands`).

    Raises
    ------
    InputError
        ``thousands`` is not one character, or is a digit or the decimal mark.
    """
    if thousands is None:
        return None
    thousands = {"space": " ", "nbsp": "\u00a0"}.get(thousands, thousands)
    point = decimal or "."
    if len(thousands) != 1 or thousands.isdigit() or thousands == point:
        raise InputError(f"--thousands {thousands!r} is not a thousands mark; give one character other than a digit "
                         f"or the decimal mark {point!r}, e.g. --thousands ',' or --thousands space")
    return thousands


def check_thousands(path: str | Path, sep: str, thousands: str | None, decimal: str = ".", *,
                    columns: list[str] | None = None, chunk_rows: int = 65_536) -> None:
    """Refuse a CSV file whose values the thousands mark would misread (``12,34`` read as 1234), before it is used.

    One pass over ``columns`` (all when None) read as text, in chunks
    (:class:`faux_checks.inputs.number_marks.ThousandsCheck`); nothing when ``thousands`` is None.

    Raises
    ------
    InputError
        Naming every such column, its count of values and the first one with its row.
    """
    if thousands is None:
        return
    found = ThousandsCheck(thousands, decimal)
    try:
        with pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, skipinitialspace=True, usecols=columns,
                         chunksize=chunk_rows) as reader:
            start = 0
            for frame in reader:
                found.scan(frame, start)
                start += len(frame)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read data file {path}: {type(exc).__name__}: {exc}") from exc
    error = found.error(path)
    if error is not None:
        raise error


def csv_field_count_errors(path: str | Path, sep: str = ",") -> MalformedRows:
    """Every CSV record whose field count differs from the header's, with its row and line numbers.

    One pass of Python's C ``csv`` reader (quoted fields, embedded newlines, ``skipinitialspace``
    as the streaming reader reads): 1.8 s per million 15-field Adult rows on 2 cores, about one
    chunked ``pd.read_csv`` of the file (1.7-2.2 s). pandas fills a short record with missing values
    and stops on a long one; this names both kinds.

    Parameters
    ----------
    path : str or Path
        A CSV file (``.gz``, ``.bz2``, ``.xz`` decompressed; zip/zstd archives are not scanned).

    Returns
    -------
    MalformedRows
        ``count == 0`` when every record has the header's field count.

    Raises
    ------
    InputError
        A file that is not UTF-8 text, or an unterminated quote.
    """
    path = Path(path)
    out = MalformedRows(str(path))
    handle = _open_text(path)
    if handle is None:
        return out
    try:
        with handle:
            reader = csv.reader(handle, skipinitialspace=True, delimiter=sep)
            header = next(reader, None)
            if header is None:
                return out
            expected = len(header)
            row = 0
            for record in reader:
                if not record:                    # a blank line: pandas skips it too
                    continue
                if len(record) != expected:
                    out.add(row, f"{len(record)} fields, expected {expected} (line {fmt_count(reader.line_num)})",
                            "a wrong field count")
                row += 1
            out.n_rows = row
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read data file {path}: {type(exc).__name__}: {exc}") from exc
    return out


def header_names(path: str | Path, sep: str = ",") -> list[str] | None:
    """The column names as the file writes them, before pandas renames a repeated one (``x1`` -> ``x1.1``).

    CSV: the first line read as data (quotes and ``skipinitialspace`` as :func:`read_table` reads
    it); Parquet: the schema's field names. None when the file cannot be read this way (the
    reader proper then reports why).
    """
    path = Path(path)
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(str(path)).names)
        first = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False, skipinitialspace=True,
                            sep=sep)
    except Exception:  # noqa: BLE001 - unreadable this way: None, the reader proper says why
        return None
    return [str(v) for v in first.iloc[0]] if len(first) else None


def check_header(path: str | Path, sep: str = ",") -> None:
    """Refuse a data file whose header repeats a column name, leaves one empty, or has two that differ
    only by surrounding whitespace (:func:`faux_checks._validation.check_column_names`).

    Raises
    ------
    InputError
        ``data file d.csv has ambiguous column names: 'x1' is given 2 times (columns 2 and 5). ...``
    """
    names = header_names(path, sep)
    if names is not None:
        check_column_names(names, what=f"data file {path}")


def read_table(path: str | Path, *, sep: str | None = None, thousands: str | None = None,
               decimal: str | None = None) -> pd.DataFrame:
    """Read a CSV (any of ``.csv``, ``.csv.gz``, ``.txt``) or Parquet file into a DataFrame.

    The CSV delimiter is ``sep`` (CLI ``--sep``) or sniffed from the file's head (:func:`sniff_sep`: ``,`` ``;``
    tab ``|``). ``thousands`` (CLI ``--thousands``) is the thousands mark of the CSV's numbers, read by pandas
    (``read_csv(thousands=...)``: ``1,234.5`` -> 1234.5; :func:`thousands_mark`), every marked value checked for
    groups of 3 digits (:func:`check_thousands`). ``decimal`` (CLI ``--decimal``) is their decimal mark, ``","``
    or ``"."``; with neither mark given it is sniffed with the delimiter (:func:`csv_number_marks`: a
    ``;``-separated file of ``0,189`` reads 0.189). Parquet ignores both.

    Raises
    ------
    InputError
        Missing file, unknown format, a parse error (message keeps the parser's words), a header
        with a repeated, empty or whitespace-ambiguous column name (:func:`check_header`: the
        names and their positions), or CSV records whose field count differs from the header's
        (:func:`csv_field_count_errors`: the first rows named and counted; never read as missing values);
        a ``thousands`` mark that is not one character, a digit or the decimal mark (:func:`thousands_mark`), a
        ``decimal`` mark other than ``,`` and ``.``, or values the thousands mark would misread (:func:`check_thousands`).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"data file {path} does not exist")
    delimiter = sniff_sep(path, sep) if path.suffix != ".parquet" else ","
    mark, point = csv_number_marks(path, delimiter, thousands, decimal) if path.suffix != ".parquet" else (None, ".")
    check_header(path, delimiter)
    if path.suffix != ".parquet":
        bad = csv_field_count_errors(path, delimiter)
        if bad.count:
            raise bad.error()
        check_thousands(path, delimiter, mark, point)
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, skipinitialspace=True, sep=delimiter, thousands=mark, decimal=point)
    except Exception as exc:
        raise InputError(f"cannot read data file {path}: {type(exc).__name__}: {exc}") from exc


def check_output_path(path: str | Path, *, option: str, folder: bool = False) -> None:
    """Refuse, before anything is computed, an output path that cannot be written.

    A file (``--scores-out``, ``--out``) needs an existing, writable folder and no file or folder of
    that name; a folder (``--report-dir``, ``--work-dir``) may be created, so it needs to be a folder
    if it exists, and its nearest existing parent a writable folder. Writability is tried (a
    temporary file created and removed), not read from the permission bits: root, a read-only mount
    and a full quota answer differently.

    Parameters
    ----------
    path : str or Path
    option : str
        The command-line option, for the message (``--scores-out``).
    folder : bool
        ``path`` is a folder to create or fill, not a file.

    Raises
    ------
    InputError
        ``--scores-out out/s.csv: folder out does not exist; create it first or choose another --scores-out``;
        a parent that is a file; a location that cannot be written (with the operating system's words).
    """
    import tempfile

    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise InputError(f"{option} {path}: a file of that name exists; choose a folder")
        parent = path
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    else:
        if path.is_dir():
            raise InputError(f"{option} {path} is a folder; give a file name")
        parent = path.parent
        if not parent.exists():
            raise InputError(f"{option} {path}: folder {parent} does not exist; create it first or choose another "
                             f"{option} (nothing was scored)")
    if not parent.is_dir():
        raise InputError(f"{option} {path}: {parent} is a file, not a folder; choose another {option} (nothing was scored)")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".faux-checks-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot write in {parent} ({exc.strerror or exc}); choose another "
                         f"{option} (nothing was scored)") from None


def write_scores(path: str | Path, result) -> Path:
    """Write one row per input row, in input order: ``row``, ``lic_score``, ``flagged``, ``status``, ``flag_probability``,
    and for the swap reading ``change_direct``, ``change_proxies``, ``change_admissible``, ``change_total`` (the
    person's f(x′) − f(x) and its parts, probability points: :mod:`faux_checks.gate.decompose`).

    Parquet when ``path`` ends in ``.parquet``, CSV otherwise.

    ``status`` is ``scored``, ``undefined`` (audited, score undefined: never counted as not
    flagged) or ``not_audited`` (dropped for a missing protected value, or not sampled); the last
    two have empty ``lic_score`` and ``flagged``. Refuses to overwrite an existing file; written
    under a temporary name and renamed once whole (:func:`faux_checks._files.whole_file`).

    Parameters
    ----------
    result : CheckResult
        With ``scores`` (n_input_rows,) and ``row_index``.
    """
    path = Path(path)
    if path.exists():
        raise InputError(f"{path} exists already; choose another --scores-out (nothing is overwritten)")
    scores = result.scores
    audited: np.ndarray = np.zeros(len(scores), dtype=bool)
    audited[result.row_index] = True
    status = np.where(~audited, "not_audited", np.where(np.isfinite(scores), "scored", "undefined"))
    flagged = pd.array(result.flagged(), dtype="boolean")
    flagged[status != "scored"] = pd.NA
    columns = {"row": np.arange(len(scores)), "lic_score": scores, "flagged": flagged, "status": status}
    if result.flag_probability is not None:
        columns["flag_probability"] = result.flag_probability
    parts = getattr(result, "decomposition", None)
    if parts is not None:                       # the swap reading: the person's change in its parts (gate/decompose.py)
        for name in parts.columns:
            column = np.full(len(scores), np.nan)
            column[np.asarray(parts.index)] = parts[name].to_numpy()
            columns[f"change_{name}"] = column
    frame = pd.DataFrame(columns)
    from .._files import whole_file

    with whole_file(path) as tmp:             # whole or absent: a full disk never leaves part of a scores file
        if path.suffix.lower() == ".parquet":
            frame.to_parquet(tmp, index=False)
        else:
            from pandas.io.common import infer_compression

            frame.to_csv(tmp, index=False, compression=infer_compression(str(path), "infer"))   # s.csv.gz: gzip
    return path
