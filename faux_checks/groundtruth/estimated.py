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

:func:`informed_probabilities` is the other case: P(c = 1 | x, s), calibrated given the features too (the
proxy-injection generator's exact likelihood of the proxies, :func:`proxy_log_odds`), under which each draw of c
has the joint law of (x, c) of the truth.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit, logit, ndtri

from ..errors import InputError

__all__ = ["estimated_audit", "informed_probabilities", "proxy_log_odds", "signal_strength", "sharpness_probabilities"]


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


def proxy_log_odds(data, z_pool: np.ndarray | None = None) -> np.ndarray:
    """log p(x | c = 1) − log p(x | c = 0) of each row's four proxies in a binary proxy-injection data set.

    From the generator's own mechanisms (:mod:`faux_checks.groundtruth.proxy`, e = 2c − 1): ``proxy_linear`` =
    s·e + ε gives 2s·x; ``proxy_nonlinear`` = exp(½(s·e + ε)) gives 2s·2 log x; ``proxy_category`` (Gumbel-max)
    gives log softmax_k(s·W·e(1)) − log softmax_k(s·W·e(0)); ``proxy_legit`` = z + s·e + ½ε gives log f(v − s) −
    log f(v + s), f the density of z + ½ε with z from ``z_pool`` (default: the rows' own latent values). The legitimate
    block is independent of c and adds nothing.

    Parameters
    ----------
    data : ProxyData
        Binary.
    z_pool : ndarray, optional
        Standardised values of the feature behind ``proxy_legit`` whose empirical law stands for z's.

    Returns
    -------
    ndarray of shape (n,)
    """
    if data.kind != "binary":
        raise InputError("proxy_log_odds reads a binary protected attribute")
    s, x = data.strength, data.proxies()
    out = 2.0 * s["linear"] * x["proxy_linear"].to_numpy()
    out += 2.0 * s["nonlinear"] * 2.0 * np.log(x["proxy_nonlinear"].to_numpy())
    levels = list(data._levels)
    angle = 2 * np.pi * np.arange(len(levels)) / len(levels) + 0.3
    w = np.cos(angle) + np.sin(angle)                                   # W_k · (1, 1)
    log_soft = [s["category"] * sign * w - np.log(np.exp(s["category"] * sign * w).sum()) for sign in (1.0, -1.0)]
    k = np.asarray([levels.index(v) for v in x["proxy_category"]])
    out += log_soft[0][k] - log_soft[1][k]
    z = np.asarray(data.legit_latent if z_pool is None else z_pool, dtype=np.float64)
    v = x["proxy_legit"].to_numpy()

    def log_density(t: np.ndarray) -> np.ndarray:            # in blocks of rows: at most ~4M pairs at a time
        step = max(1, 4_000_000 // max(len(z), 1))
        parts = [np.exp(-0.5 * ((t[i:i + step, None] - z[None, :]) / 0.5) ** 2).mean(axis=1)
                 for i in range(0, len(t), step)]
        return np.log(np.concatenate(parts) + 1e-300)
    return out + log_density(v - s["legit"]) - log_density(v + s["legit"])


def informed_probabilities(data, auc: float, *, seed: int, share: float, z_pool: np.ndarray | None = None) -> np.ndarray:
    """P(c = 1 | x, s): calibrated given the features **and** a signal s of ROC-AUC ``auc`` (module docstring),
    ``logit share + proxy_log_odds(x) + 2a·s``, the posterior of the audit population with c-share ``share``.

    Returns
    -------
    ndarray of shape (n,), in (0, 1)
    """
    a = signal_strength(auc)
    c = np.asarray(data.c, dtype=np.float64)
    s = a * (2.0 * c - 1.0) + np.random.default_rng(seed).standard_normal(len(c))
    return expit(logit(share) + proxy_log_odds(data, z_pool) + 2.0 * a * s)
