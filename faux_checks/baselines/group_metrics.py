"""Group fairness metrics via fairlearn (demographic parity and equalized odds differences)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["group_metrics"]


def group_metrics(y_pred: np.ndarray, groups: np.ndarray, y_true: np.ndarray | None = None) -> dict[str, float]:
    """Demographic parity difference (and equalized odds difference when labels are given).

    Parameters
    ----------
    y_pred : ndarray of shape (n,)
        Binary predictions (0/1), e.g. ``P(y=1|x) > 0.5``.
    groups : ndarray of shape (n,)
        Protected group label per row.
    y_true : ndarray of shape (n,), optional
        Binary labels.

    Returns
    -------
    dict
        ``demographic_parity_difference`` (max − min selection rate over groups) and, with labels,
        ``equalized_odds_difference`` (fairlearn's: the larger of the TPR and FPR gaps), both in [0, 1].

    Raises
    ------
    InputError
        Lengths differ, or fewer than two groups.

    Notes
    -----
    fairlearn.metrics (Bird et al. 2020); group metrics say nothing about individuals and are
    reported next to fAux, not instead of it.
    """
    from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference

    y_pred = np.asarray(y_pred).astype(int)
    groups = np.asarray(groups)
    if len(y_pred) != len(groups):
        raise InputError(f"predictions have {len(y_pred)} rows but groups have {len(groups)}")
    if len(np.unique(groups)) < 2:
        raise InputError("group metrics need at least two protected groups")
    out = {"demographic_parity_difference": float(demographic_parity_difference(y_pred, y_pred, sensitive_features=groups))}
    if y_true is not None:
        y_true = np.asarray(y_true).astype(int)
        if len(np.unique(y_true)) < 2:
            raise InputError("equalized odds needs both label values in the audit data")
        out["equalized_odds_difference"] = float(equalized_odds_difference(y_true, y_pred, sensitive_features=groups))
    return out
