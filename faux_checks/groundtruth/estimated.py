"""Ground truth for a protected attribute given only as estimated probabilities: calibrated, of a chosen sharpness.

The rows keep their exact c (from any generator with a known counterfactual, e.g. :mod:`faux_checks.groundtruth.proxy`
on real Adult rows), so every person's true individual-fairness score is known; the tool is given instead, per row,
calibrated group probabilities whose sharpness is set by their ROC-AUC against c.

Generative model (our construction; all draws seeded), binary c ∈ {0, 1} with population share π:

- a signal s = a·(2c − 1) + ε, ε ~ N(0, 1) independent of everything else (what surname and geography tell);
- the probability the tool reads, p = P(c = 1 | s) = σ(logit π + 2a·s) (Bayes' rule with two unit-variance normals),
  calibrated given s and marginally (E[p] = π), but not given x: c's dependence on the features is not in it, so the
  drawn c is an attenuated copy of the true one, more so the blunter p is;
- a from the target ROC-AUC A of s (hence of p) against c: A = Φ(√2·a) (two normals a distance 2a apart), a =
  Φ⁻¹(A)/√2. :func:`~faux_checks.inputs.probabilities.expected_auc` of p estimates A from the probabilities alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit, logit, ndtri

from ..errors import InputError

__all__ = ["estimated_audit", "signal_strength", "sharpness_probabilities"]


def signal_strength(auc: float) -> float:
    """a of the signal s = a·(2c − 1) + N(0, 1) whose ROC-AUC against c is ``auc`` (a = Φ⁻¹(auc)/√2).

    Raises
    ------
    InputError
        ``auc`` outside (0.5, 1).
    """
    if not 0.5 < float(auc) < 1.0:
        raise InputError(f"the sharpness (ROC-AUC of the probabilities against c) must lie in (0.5, 1); got {auc}")
    return float(ndtri(float(auc)) / np.sqrt(2.0))


def sharpness_probabilities(c: np.ndarray, auc: float, *, seed: int, share: float | None = None) -> np.ndarray:
    """Calibrated probabilities P(c = 1 | s) of a binary c at ROC-AUC ``auc`` (module docstring).

    Parameters
    ----------
    c : ndarray of shape (n,)
        0/1.
    auc : float
        In (0.5, 1).
    seed : int
        Seeds the signal's noise.
    share : float, optional
        π, the population share of c = 1 (default: the share in ``c``).

    Returns
    -------
    ndarray of shape (n,), in (0, 1)
        p_i = P(c_i = 1 | s_i).

    Raises
    ------
    InputError
        c not 0/1, or :func:`signal_strength`'s.
    """
    c = np.asarray(c)
    if not np.isin(c, (0, 1)).all():
        raise InputError("c must be 0/1 for the estimated-probability generator (binary protected attribute)")
    a = signal_strength(auc)
    pi = float(np.mean(c)) if share is None else float(share)
    s = a * (2.0 * c - 1.0) + np.random.default_rng(seed).standard_normal(len(c))
    return expit(logit(pi) + 2.0 * a * s)


def estimated_audit(frame: pd.DataFrame, column: str, auc: float, *, seed: int,
                    groups: tuple[str, str] = ("g0", "g1")) -> pd.DataFrame:
    """The audit rows as the tool gets them: ``column`` (0/1) replaced by the two groups' probability columns.

    Parameters
    ----------
    frame : DataFrame of shape (n, any)
        With the exact protected column ``column`` (0/1).
    auc, seed
        As for :func:`sharpness_probabilities`.
    groups : (str, str)
        Names of c = 0 and c = 1; the columns are ``p_<group>``.

    Returns
    -------
    DataFrame of shape (n, any + 1)
        ``frame`` without ``column``, with ``p_<groups[0]>`` = 1 − p and ``p_<groups[1]>`` = p.
    """
    p = sharpness_probabilities(frame[column].to_numpy(), auc, seed=seed)
    return frame.drop(columns=[column]).assign(**{f"p_{groups[0]}": 1.0 - p, f"p_{groups[1]}": p})
