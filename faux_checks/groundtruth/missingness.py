"""A proxy that lives in missingness: a column missing more often in one group, with a known counterfactual.

The mechanism (our generator): a protected group ``c`` (``"A"`` with probability ``share``, else ``"B"``),
a legitimate feature ``x1 ~ N(0, 1)`` independent of c, an ordinary proxy ``x2 = shift · [c = A] + N(0, 1)``,
and ``savings ~ N(0, 1)`` independent of c whose value is missing when ``U < rate[c]``, ``U ~ Uniform(0, 1)``
drawn once per person (e.g. 30% missing in A, 5% in B). Labels (:func:`missingness_labels`) depend on x1
only (fair) or on x1 and on whether savings is missing (unfair: the label is biased through the missingness).

The truth (:func:`counterfactual_rows`, :func:`true_share`): flip c, keep each person's noise (x1, the noise
of x2, the latent savings and U: the comonotone coupling of missingness, a person missing in the group with
the lower rate is missing in the other too), redraw x2 and the missingness with the other group's values,
and recompute the target there. ``share of |f(x′) − f(x)| > δ`` is the true share of affected individuals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..errors import InputError

__all__ = ["MissingnessData", "counterfactual_rows", "missingness_labels", "missingness_proxy", "true_share"]


@dataclass(frozen=True)
class MissingnessData:
    """Rows of :func:`missingness_proxy` with the noise their counterfactual keeps.

    Attributes
    ----------
    frame : DataFrame of shape (n, 4)
        ``group`` ("A"/"B"), ``x1``, ``x2``, ``savings`` (NaN where missing).
    latent_savings : ndarray of shape (n,)
        Income where it is missing too.
    u : ndarray of shape (n,)
        The uniform that decides missingness (missing iff ``u < rate[group]``).
    noise_x2 : ndarray of shape (n,)
        ``x2`` minus its group shift.
    rates : dict of str -> float
        Missing rate per group.
    shift : float
        ``x2``'s mean in A minus its mean in B.
    """

    frame: pd.DataFrame
    latent_savings: np.ndarray
    u: np.ndarray
    noise_x2: np.ndarray
    rates: dict
    shift: float


def missingness_proxy(n: int, *, seed: int, rates: tuple[float, float] = (0.30, 0.05), share: float = 0.4,
                      shift: float = 1.5) -> MissingnessData:
    """``n`` rows whose ``savings`` is missing at rate ``rates[0]`` in group A and ``rates[1]`` in group B.

    Parameters
    ----------
    n : int
        Rows (at least 2).
    seed : int
        ``numpy.random.default_rng(seed)``.
    rates : (float, float)
        Missing rates of groups A and B, in [0, 1].
    share : float
        P(group = A), in (0, 1).
    shift : float
        Mean of ``x2`` in A minus in B (an ordinary proxy, so that the auxiliary model can reach the gate's
        quality floor; 0 leaves missingness the only proxy).

    Raises
    ------
    InputError
        ``n`` < 2, a rate outside [0, 1] or ``share`` outside (0, 1).
    """
    if n < 2 or not all(0.0 <= r <= 1.0 for r in rates) or not 0.0 < share < 1.0:
        raise InputError(f"missingness_proxy needs n >= 2, rates in [0, 1] and share in (0, 1); got n={n}, "
                         f"rates={rates}, share={share}")
    rng = np.random.default_rng(seed)
    a = rng.random(n) < share
    x1, noise_x2, latent, u = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n), rng.random(n)
    rate = {"A": float(rates[0]), "B": float(rates[1])}
    group = np.where(a, "A", "B")
    missing = u < np.where(a, rate["A"], rate["B"])
    frame = pd.DataFrame({"group": group, "x1": x1, "x2": noise_x2 + shift * a,
                          "savings": np.where(missing, np.nan, latent)})
    return MissingnessData(frame=frame, latent_savings=latent, u=u, noise_x2=noise_x2, rates=rate, shift=float(shift))


def missingness_labels(data: MissingnessData, *, unfair: bool, seed: int, bias: float = 2.5) -> np.ndarray:
    """0/1 labels, (n,) int64: ``Bernoulli(sigmoid(1.5·x1 − bias·[savings missing]))`` (unfair) or without the
    missingness term (fair); seeded by ``seed``."""
    f = data.frame
    logit = 1.5 * f["x1"].to_numpy() - (bias * f["savings"].isna().to_numpy() if unfair else 0.0)
    p = 1.0 / (1.0 + np.exp(-logit))
    return (np.random.default_rng(seed).random(len(f)) < p).astype(np.int64)


def counterfactual_rows(data: MissingnessData) -> pd.DataFrame:
    """Each row with c flipped and its noise kept: x2 and the missingness of savings redrawn from the other group.

    Returns
    -------
    DataFrame of shape (n, 4)
        The columns of ``data.frame``; ``savings`` is the latent savings where the other group's rate leaves it
        present (``u >= rate[other]``), NaN where it is missing.
    """
    f = data.frame
    other = np.where(f["group"].to_numpy() == "A", "B", "A")
    missing = data.u < np.where(other == "A", data.rates["A"], data.rates["B"])
    return pd.DataFrame({"group": other, "x1": f["x1"].to_numpy(), "x2": data.noise_x2 + data.shift * (other == "A"),
                         "savings": np.where(missing, np.nan, data.latent_savings)})


def true_share(probability: Callable[[pd.DataFrame], np.ndarray], data: MissingnessData, delta: float) -> float:
    """The share of rows whose P(y = 1), ``probability(frame)`` (n,), moves by more than ``delta`` when only c changes.

    ``probability`` reads the target's inputs from a frame (e.g. ``lambda f: model.predict_proba(f[cols])[:, 1]``).
    """
    before = np.asarray(probability(data.frame), dtype=np.float64)
    after = np.asarray(probability(counterfactual_rows(data)), dtype=np.float64)
    return float(np.mean(np.abs(after - before) > delta))
