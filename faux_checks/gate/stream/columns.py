"""The protected attributes of a streamed check: a declared column or an intersection, and its group labels per chunk.

Our reading of how the in-memory path names groups (:func:`~faux_checks.inputs.protected.encode_protected`),
applied chunk by chunk so an intersection's cells are never written to the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...inputs.protected import all_number, fmt_level
from ..policy_schema import INTERSECTION_SEPARATOR, Policy

__all__ = ["StreamAttribute", "level_labels"]


def level_labels(values: pd.Series) -> pd.Series:
    """Each non-missing value's group label as :func:`~faux_checks.inputs.protected.encode_protected` writes it; NA elsewhere.

    Numbers ``1``, ``1.0`` -> ``'1'`` and ``0.5`` -> ``'0.5'``; booleans ``'True'``/``'False'``;
    anything else ``str(value)``. Our reading of the in-memory labels, which depend on the column's
    dtype only (a Parquet column has one dtype in every chunk; a CSV chunk's integers and floats
    give the same labels).
    """
    known = values.notna().to_numpy()
    out = pd.Series(pd.NA, index=values.index, dtype=object)
    s = values[known]
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object).astype(str)
    elif pd.api.types.is_bool_dtype(s):
        s = s.astype(bool).astype(str)
    elif pd.api.types.is_numeric_dtype(s) or (s.dtype == object and len(s) and all_number(s)):
        s = s.map(fmt_level)
    else:
        s = s.astype(str)
    out[known] = s.to_numpy(dtype=object)
    return out


@dataclass(frozen=True)
class StreamAttribute:
    """One protected attribute of a streamed check: a declared column or an intersection.

    Attributes
    ----------
    name : str
        The column, or the intersection's derived name (``sex×race``).
    components : tuple of str
        An intersection's columns; empty for a declared attribute.
    policy : Policy
        Its single-attribute policy (:meth:`~faux_checks.gate.policy.Policy.attribute_policies`).
    """

    name: str
    components: tuple[str, ...]
    policy: Policy

    def values(self, frame: pd.DataFrame) -> pd.Series:
        """The attribute's raw values on a chunk, shape (n,): the column, or the cell labels (NA where a component is)."""
        if not self.components:
            return frame[self.name]
        parts = [level_labels(frame[c]) for c in self.components]
        known = np.logical_and.reduce([p.notna().to_numpy() for p in parts])
        cells = pd.Series(pd.NA, index=frame.index, dtype=object)
        joined = parts[0][known].astype(str)
        for p in parts[1:]:
            joined = joined + INTERSECTION_SEPARATOR + p[known].astype(str)
        cells[known] = joined.to_numpy(dtype=object)
        return cells
