"""The direct term: how the target's own protected-attribute columns change with the group (∂x/∂c).

Pure functions of the feature spec and the protected attribute's codec (docs/method.md, the direct term); used by
the in-memory and streamed scorers and by the FTU flip tester.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..inputs.protected import ProtectedAttribute
from ..inputs.tabular import ColumnEncoding, FeatureSpec
from ..kinds import protected_kind

__all__ = ["direct_derivative", "encoded_level"]


def encoded_level(enc: ColumnEncoding, label: str) -> np.ndarray:
    """Encoded vector (width,) of one protected group's value in the target's features."""
    if enc.kind == "numeric":
        try:
            value = {"True": 1.0, "False": 0.0}[label] if label in ("True", "False") else float(label)
        except ValueError as exc:
            raise InputError(f"protected group '{label}' of numeric input column '{enc.name}' is not a number") from exc
        scale = enc.std if enc.std > 0 else 1.0
        return np.array([(value - enc.mean) / scale])
    vec = np.zeros(enc.width)
    if label in enc.levels:
        vec[enc.levels.index(label)] = 1.0
    elif "__infrequent__" in enc.levels:
        vec[enc.levels.index("__infrequent__")] = 1.0
    else:
        raise InputError(f"protected group '{label}' is not a level of input column '{enc.name}' ({list(enc.levels)})")
    return vec


def direct_derivative(spec: FeatureSpec, protected: ProtectedAttribute) -> tuple[np.ndarray, np.ndarray]:
    """∂x/∂c for the target's own protected-attribute features (docs/method.md, the direct term).

    Returns
    -------
    mask : ndarray of shape (d,), bool
        Encoded features of the protected column.
    dx_dc : ndarray of shape (d, k)
        Binary/multi-class: encoded value of group j minus that of group 0 (j = 1..m−1), i.e.
        the change of x when the individual's group changes, in the same parametrisation as the
        aux model's k outputs; continuous: 1/std (per unit of c).
    """
    mask = spec.feature_mask(protected.name)
    enc = spec.columns[spec.source_columns.index(protected.name)]
    if not protected_kind(protected.kind).grouped:
        cols = np.array([[1.0 / (enc.std if enc.std > 0 else 1.0)]])
    else:
        base = encoded_level(enc, protected.groups[0])
        cols = np.stack([encoded_level(enc, g) - base for g in protected.groups[1:]], axis=1)  # (width, k)
    dx_dc = np.zeros((spec.n_features, cols.shape[1]))
    dx_dc[mask] = cols
    return mask, dx_dc
