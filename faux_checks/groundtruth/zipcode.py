"""A high-cardinality categorical proxy on real rows: a zip-code-like column of 60 unordered levels.

Real rows give what c does not cause (z⊥ of Definition 1); a binary protected attribute c is drawn independently
of them and a column ``zip`` is generated from c with stored noise. Each level k has a popularity α_k and a place
x_k = 2k/(K − 1) − 1 on a line (where it lies); group 1 lives more toward one end: the level logits are

    η_k(c) = α_k + s · e(c) · x_k,     e(c) = 2c − 1,

so that a level's likelihood ratio between the groups, e^{2 s x_k}, is monotone along the line while the
levels' frequencies are irregular (α_k ~ N(0, 0.6²), seeded). Two couplings generate the level from the noise,
both with the same marginals P(zip | c) (so the data cannot tell them apart):

- ``"inverse_cdf"``: zip = F_c⁻¹(u), u ~ U(0, 1) stored, the levels in their order on the line (a person keeps
  their rank: the comonotone coupling);
- ``"gumbel"``: zip = argmax_k (η_k(c) + g_k), g standard Gumbel (n, K) stored (the Gumbel-max coupling).

The counterfactual regenerates ``zip`` for the other group with the same noise, everything else fixed, so every
individual's IFS is exact for any target (:func:`zip_fairness_scores`). The family's unfair target reads the
place of the level (:func:`zip_unfair_logit`: redlining along the line); the fair control does not read ``zip``
(:func:`zip_fair_logit`). Our construction (docs/benchmark.md, "Categorical proxies: the coupling").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError
from .proxy import InjectedProtected

__all__ = ["REDLINING", "ZIP_COUPLINGS", "ZIP_LEVELS", "ZipData", "make_zip_data", "zip_fair_logit", "zip_fairness_scores",
           "zip_unfair_logit"]

#: The generating couplings of the level.
ZIP_COUPLINGS = ("inverse_cdf", "gumbel")
#: Number of levels.
ZIP_LEVELS = 60
#: Spread of the levels' popularity α_k and the strength s of c along the line.
POPULARITY_SD = 0.6
DEFAULT_ZIP_STRENGTH = 1.2
#: The unfair target's logit per unit of place x_k.
REDLINING = 0.6


@dataclass(frozen=True)
class ZipData(InjectedProtected):
    """Real rows with a binary protected attribute and a 60-level categorical proxy (:func:`make_zip_data`).

    Attributes
    ----------
    base : DataFrame of shape (n, p)
        Real columns c does not cause.
    c : ndarray of shape (n,), int64
        0/1.
    coupling : {"inverse_cdf", "gumbel"}
    popularity : ndarray of shape (K,)
        α_k.
    strength : float
        s.
    noise : dict of ndarray
        ``u`` (n,) uniform, ``g`` (n, K) standard Gumbel.
    """

    base: pd.DataFrame
    c: np.ndarray
    coupling: str
    popularity: np.ndarray
    strength: float
    noise: dict
    kind: str = "binary"
    n_groups: int = 2
    protected_name: str = "c"

    def __len__(self) -> int:
        return len(self.c)

    @property
    def index(self) -> pd.Index:
        return self.base.index

    @property
    def places(self) -> np.ndarray:
        """x_k (K,), in [−1, 1]: each level's place on the line."""
        K = len(self.popularity)
        return 2.0 * np.arange(K) / (K - 1) - 1.0

    def level_probabilities(self, c) -> np.ndarray:
        """P(zip = k | c) (n, K) for protected values ``c`` (n,)."""
        eta = self.popularity[None, :] + self.strength * (2.0 * np.asarray(c, dtype=np.float64) - 1.0)[:, None] \
            * self.places[None, :]
        p = np.exp(eta - eta.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def level(self, c=None) -> np.ndarray:
        """The level index (n,) int64 for protected values ``c`` (default: the rows' own), same noise."""
        c = self.c if c is None else np.asarray(c)
        if self.coupling == "gumbel":
            eta = np.log(self.level_probabilities(c))
            return (eta + self.noise["g"]).argmax(axis=1)
        cdf = np.cumsum(self.level_probabilities(c), axis=1)
        return np.minimum((cdf < self.noise["u"][:, None]).sum(axis=1), cdf.shape[1] - 1)

    def caused(self, c=None) -> pd.DataFrame:
        """The ``zip`` column (level names ``z00`` … ``z59``) for protected values ``c``."""
        names = np.asarray([f"z{k:02d}" for k in range(len(self.popularity))], dtype=object)
        return pd.DataFrame({"zip": names[self.level(c)]}, index=self.base.index)

    def frame(self, c=None) -> pd.DataFrame:
        """What a target can see for protected values ``c``: the real block and ``zip``."""
        return pd.concat([self.base, self.caused(c)], axis=1)

    def subset(self, rows) -> "ZipData":
        """The same data restricted to ``rows`` (index array or bool mask), re-indexed 0..n−1."""
        rows = np.asarray(rows)
        return replace(self, base=self.base.iloc[rows].reset_index(drop=True), c=self.c[rows],
                       noise={k: v[rows] for k, v in self.noise.items()})


def make_zip_data(features: pd.DataFrame, *, coupling: str, strength: float = DEFAULT_ZIP_STRENGTH,
                  levels: int = ZIP_LEVELS, seed: int = 0, protected_name: str = "c") -> ZipData:
    """Draw c, the levels' popularity and the noise of ``zip`` on real rows (module docstring).

    Parameters
    ----------
    features : DataFrame of shape (n, p)
        Real rows, no missing values, without a column named ``zip``.
    coupling : {"inverse_cdf", "gumbel"}
    strength : float
        s ≥ 0 (0: ``zip`` independent of c).
    levels : int
        K ≥ 2.
    seed : int
    protected_name : str

    Returns
    -------
    ZipData

    Raises
    ------
    InputError
        An unknown coupling, s < 0, K < 2, missing values, or a column named ``zip``.
    """
    if coupling not in ZIP_COUPLINGS:
        raise InputError(f"coupling must be one of {list(ZIP_COUPLINGS)}, got {coupling!r}")
    if strength < 0 or levels < 2:
        raise InputError(f"strength must be >= 0 and levels >= 2, got {strength} and {levels}")
    frame = features.reset_index(drop=True)
    if "zip" in frame.columns:
        raise InputError("the features already hold a column named 'zip'; rename it")
    missing = int(frame.isna().any(axis=1).sum())
    if missing:
        raise InputError(f"the features have {fmt_count(missing)} rows with missing values; drop or impute them")
    rng = np.random.default_rng(seed)
    n = len(frame)
    popularity = rng.normal(0.0, POPULARITY_SD, levels)
    c = rng.integers(0, 2, n)
    noise = {"u": rng.random(n), "g": rng.gumbel(size=(n, levels))}
    return ZipData(base=frame, c=c, coupling=coupling, popularity=popularity, strength=float(strength), noise=noise,
                   protected_name=protected_name)


def zip_unfair_logit(frame: pd.DataFrame, base_logit: np.ndarray | None = None, *, levels: int = ZIP_LEVELS,
                     redlining: float = REDLINING) -> np.ndarray:
    """The family's unfair target: a logit (n,) of −``redlining`` · x_k for the row's level k (of ``levels``), plus
    ``base_logit``."""
    k = frame["zip"].str.slice(1).astype(int).to_numpy()
    place = 2.0 * k / (levels - 1) - 1.0
    return -redlining * place + (0.0 if base_logit is None else np.asarray(base_logit, dtype=np.float64))


def zip_fair_logit(frame: pd.DataFrame, base_logit: np.ndarray | None = None) -> np.ndarray:
    """The family's fair control: a logit (n,) blind to ``zip`` (``base_logit``, or 0)."""
    return np.zeros(len(frame)) if base_logit is None else np.asarray(base_logit, dtype=np.float64)


def zip_fairness_scores(predict: Callable[[pd.DataFrame], np.ndarray], data: ZipData) -> np.ndarray:
    """Ground-truth IFS (n,), probability points: |f(x(c)) − f(x(1 − c))|, ``zip`` regenerated, the rest fixed."""
    p = np.asarray(predict(data.frame()), dtype=np.float64)
    return np.abs(np.asarray(predict(data.frame(1 - data.c)), dtype=np.float64) - p)
