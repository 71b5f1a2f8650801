"""How a CSV file writes its numbers: the decimal mark and the thousands mark, sniffed or given, and checked.

pandas reads what it is told without a word: ``read_csv(thousands=",")`` reads ``12,34`` as 1234 and ``0,189`` as
189, and without ``decimal=","`` a column of ``-162,4`` is text. This module decides the marks and refuses what
they would misread:

- a comma between digits is read as a decimal comma or a thousands mark only where the value allows one reading
  (:func:`comma_reading`): ``0,189``, ``12,34``, ``-162,4`` and ``1.234,5`` are decimal commas, ``1,234.5`` and
  ``1,234,567`` thousands marks, ``1,234`` either (ambiguous: never guessed);
- the decimal comma is sniffed together with the delimiter (:func:`sniff_decimal`): a file not separated by ``,``
  whose head holds decimal commas and no thousands-marked number is read with ``decimal=","``;
- a thousands mark must be followed by exactly three digits, the first group having one to three digits and no
  leading zero (:class:`ThousandsCheck`), as the SI/ISO 80000-1 digit grouping and spreadsheets write numbers.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

import pandas as pd

from .._validation import fmt_count
from ..errors import InputError

__all__ = ["DECIMAL_MARKS", "ThousandsCheck", "comma_reading", "decimal_mark", "sniff_decimal"]

#: Decimal marks a CSV file's numbers may use (CLI ``--decimal``).
DECIMAL_MARKS = (".", ",")

_COMMA_THOUSANDS = re.compile(r"^[+-]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d*)?$")           # 1,234  1,234.5  12,345,678
_COMMA_DECIMAL = re.compile(r"^[+-]?(?:\d+|[1-9]\d{0,2}(?:\.\d{3})+),\d+$")          # 0,189  -162,4  1.234,5


def comma_reading(value) -> str | None:
    """How a value with a comma between digits can be read as a number.

    Returns
    -------
    {"thousands", "decimal", "either"} or None
        ``"thousands"``: only with ``,`` as the thousands mark (``1,234.5``, ``1,234,567``); ``"decimal"``: only
        with ``,`` as the decimal mark (``0,189``, ``12,34``, ``-162,4``, ``1234,5``, ``1.234,5``); ``"either"``:
        both readings hold and differ (``1,234`` is 1234 or 1.234); None: not a number written with a comma.
    """
    if not isinstance(value, str) or "," not in value:
        return None
    text = value.strip()
    thousands, decimal = bool(_COMMA_THOUSANDS.match(text)), bool(_COMMA_DECIMAL.match(text))
    if thousands and decimal:
        return "either"
    return "thousands" if thousands else "decimal" if decimal else None


def decimal_mark(decimal: str | None, thousands: str | None) -> str | None:
    """The decimal mark given for a CSV file's numbers (CLI ``--decimal``), checked against its thousands mark.

    Raises
    ------
    InputError
        ``decimal`` is not one of :data:`DECIMAL_MARKS`, or equals the thousands mark (the value named).
    """
    if decimal is None:
        return None
    if decimal not in DECIMAL_MARKS:
        raise InputError(f"--decimal {decimal!r} is not a decimal mark; give --decimal ',' (0,5 is one half) or "
                         "--decimal '.' (0.5)")
    if thousands is not None and thousands == decimal:
        raise InputError(f"--decimal {decimal!r} and --thousands {thousands!r} are the same mark, so every number "
                         "written with it would be misread; give the one the file means")
    return decimal


def sniff_decimal(head: str, sep: str) -> str | None:
    """The decimal mark a CSV file's head shows: ``","`` or None (pandas' default ``"."``).

    ``","`` when the file is not ``,``-separated and its head (after the header line) holds a number only a
    decimal comma reads (:func:`comma_reading` ``"decimal"``, e.g. ``0,189``) and none only a thousands mark
    reads (``1,234.5``); a head with both, or only ``1,234``-like values, is not guessed (such columns stay text
    and are refused, naming the mark to give).

    Parameters
    ----------
    head : str
        The file's first lines (whole lines).
    sep : str
        The file's delimiter (:func:`faux_checks.inputs.io.sniff_sep`).
    """
    if sep == ",":
        return None
    readings: set[str | None] = set()
    rows = csv.reader(io.StringIO(head), delimiter=sep, skipinitialspace=True)
    next(rows, None)
    try:
        for row in rows:
            readings.update(comma_reading(v) for v in row if "," in v)
    except csv.Error:
        return None
    return "," if "decimal" in readings and "thousands" not in readings else None


def _number_like(mark: str, decimal: str) -> re.Pattern:
    """Digits and ``mark`` (at least one), an optional decimal part: what pandas' ``thousands=mark`` turns into a number."""
    m, d = re.escape(mark), re.escape(decimal)
    return re.compile(rf"^[+-]?(?=[\d{m}]*{m})[\d{m}]*\d[\d{m}]*(?:{d}\d*)?$")


@dataclass
class ThousandsCheck:
    """Values a thousands mark would misread, per column: count, first value and its row.

    A value of digits and the mark (``12,34``, ``0,189``, ``1,2,3``) is read by pandas as one number with the marks
    removed; it is a thousands-marked number only when each mark is followed by exactly 3 digits and the first
    group has 1 to 3 digits without a leading zero (``1,234``, ``12,345.6``). Scan chunks of the file read as text
    (:meth:`scan`), then :meth:`error`.

    Attributes
    ----------
    thousands, decimal : str
        The marks the file is read with.
    columns : dict of column -> [count, first value, first row, whether every such value reads as a decimal comma]
    """

    thousands: str
    decimal: str = "."
    columns: dict = field(default_factory=dict)

    def scan(self, frame: pd.DataFrame, start: int = 0) -> None:
        """Add the misread values of ``frame`` (every column read as text; rows numbered from ``start``)."""
        t, d = re.escape(self.thousands), re.escape(self.decimal)
        valid = re.compile(rf"^[+-]?[1-9]\d{{0,2}}(?:{t}\d{{3}})+(?:{d}\d*)?$")
        candidate = _number_like(self.thousands, self.decimal)
        for col in frame.columns:
            text = frame[col].dropna().astype(str).str.strip()
            marked = text[text.str.contains(self.thousands, regex=False)]
            if marked.empty:
                continue
            wrong = marked.str.match(candidate) & ~marked.str.match(valid)
            if wrong.any():
                first = int(frame.index.get_loc(wrong.idxmax()))
                entry = self.columns.setdefault(str(col), [0, marked[wrong].iloc[0], start + first, True])
                entry[0] += int(wrong.sum())
                entry[3] = entry[3] and bool((marked[wrong].map(comma_reading) == "decimal").all())

    def error(self, path) -> InputError | None:
        """The InputError naming every column, its count and an example row; None when nothing is misread."""
        if not self.columns:
            return None
        parts = [f"column {col!r} has {fmt_count(n)} such {'value' if n == 1 else 'values'} (e.g. {value!r} in row "
                 f"{fmt_count(row)})"
                 for col, (n, value, row, _) in self.columns.items()]
        decimal = self.thousands == "," and all(entry[3] for entry in self.columns.values())
        fix = ("; they read as decimal commas: read the file with --decimal ',' instead" if decimal else
               "; write the numbers plainly (1234.5) or give the mark they use")
        mark = "space" if self.thousands == " " else repr(self.thousands)
        return InputError(
            f"data file {path}: --thousands {mark} would misread numbers whose {self.thousands!r} is not followed by "
            f"groups of exactly 3 digits (a thousands mark is: 1{self.thousands}234{self.decimal}5): "
            f"{'; '.join(parts)}{fix}. Rows are numbered from 0 after the header; nothing was scored")
