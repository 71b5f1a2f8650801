"""How report values read in the HTML page and the Prefect artifacts (private module; public names)."""

from __future__ import annotations

import json

__all__ = ["fmt", "pct"]


def fmt(v) -> str:
    """A value as a report cell: ``n/a`` for None, yes/no, 4 significant digits, JSON for lists and dicts."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def pct(v) -> str:
    """A fraction as a percentage with two decimals, ``n/a`` for None."""
    return "n/a" if v is None else f"{v:.2%}"
