"""The values of the registry's tags: written by :func:`tag_value`, read back by the ``parse_*`` functions.

Floats are written exactly (``repr``), None as ``""``, bools ``true``/``false``. A number that is missing,
``""``, ``"None"``, not a number or not finite reads as None; a text that is missing, ``""`` or ``"None"``
reads as None. The record codec (:mod:`faux_checks.registry.records`) reads and writes every tag through
these. Imports nothing from the rest of the package (a leaf).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["parse_bool", "parse_count", "parse_number", "parse_text", "tag_value"]


def tag_value(value: Any) -> str:
    """Tag/param string of a value: floats round-trip exactly (repr), None is ``""``, bools ``true``/``false``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse_number(text: Any) -> float | None:
    """A tag's number: None when missing, ``""``, ``"None"``, not a number, NaN or infinite."""
    try:
        f = float(text)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def parse_count(text: Any) -> int | float | None:
    """A tag's count (``"12"`` -> 12); a non-integral number as :func:`parse_number`, else None."""
    try:
        return int(str(text))
    except (TypeError, ValueError):
        return parse_number(text)


def parse_text(text: Any) -> str | None:
    """A tag's text: None when missing, ``""`` or ``"None"`` (how None was written by older gates)."""
    return None if text in (None, "", "None") else str(text)


def parse_bool(text: Any) -> bool | None:
    """``"true"`` / ``"false"`` (any case) as a bool; anything else None."""
    low = str(text).lower() if text is not None else ""
    return True if low == "true" else False if low == "false" else None
