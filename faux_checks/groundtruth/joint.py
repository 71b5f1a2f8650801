"""Joint-only proxies on real rows: c readable only from a combination of columns, each alike in every group.

A per-column test of independence from c holds each column of such a pair, and the counterfactual then moves
nothing though the pair carries c. Real rows give what c does not cause (z⊥ of Definition 1); a binary
protected attribute c is drawn independently of them; two columns are added, ``joint_a`` (stored noise, not
caused by c) and ``joint_b`` (caused by c and stored noise). Each column has the same distribution in both
groups; the pair determines c up to a share ``flip`` of rows. The counterfactual regenerates ``joint_b`` for
the other group with the same noise, everything else fixed, so every individual's IFS is exact for any target.

Constructions (our own; e(c) = 2c − 1, f = −1 on a stored share ``flip`` of rows and +1 elsewhere):

============  ==============================================================================================
construction  the two columns
============  ==============================================================================================
``sign``      ``joint_a = z₁``, ``joint_b = e(c)·f·sign(z₁)·|z₂|`` (z ~ N(0, 1)): sign(a·b) = e(c)·f, a sign
              interaction; both columns N(0, 1) in each group
``ratio``     ``joint_a = exp(z₁)``, ``joint_b = exp(ρ·e(c)·f·z₁ + √(1 − ρ²)·z₂)``, ρ = 0.8: the ratio b/a is
              near 1 in one group and spread in the other; both columns log-normal(0, 1) in each group
``xor``       ``joint_a = u``, ``joint_b = u XOR c XOR 1[f = −1]`` (u ~ Bernoulli(½)): an XOR of binaries, both
              Bernoulli(½) in each group
============  ==============================================================================================

The joint law of (joint_a, joint_b) given c is symmetric in the two columns for every construction (``ratio``
in logs), so which of them c causes is not identified from the data: a target that reads ``joint_a`` alone is
fair by construction and indistinguishable from one that reads ``joint_b`` alone. The fair control of this
family reads neither (:func:`joint_fair_logit`); the unfair target reads their interaction
(:func:`joint_unfair_logit`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError
from .proxy import InjectedProtected

__all__ = ["JOINT_COLUMNS", "JOINT_CONSTRUCTIONS", "JointData", "joint_fair_logit", "joint_fairness_scores",
           "joint_unfair_logit", "make_joint_data"]

JOINT_CONSTRUCTIONS = ("sign", "ratio", "xor")
JOINT_COLUMNS = ("joint_a", "joint_b")
#: ρ of the ``ratio`` construction.
RATIO_RHO = 0.8


@dataclass(frozen=True)
class JointData(InjectedProtected):
    """Real rows with a binary protected attribute and a pair of columns that carries it only jointly.

    Attributes
    ----------
    base : DataFrame of shape (n, p)
        Real columns c does not cause.
    c : ndarray of shape (n,), int64
        0/1.
    construction : str
        One of :data:`JOINT_CONSTRUCTIONS`.
    noise : dict of ndarray
        ``z1``, ``z2`` (n,) standard normal, ``u`` (n,) 0/1, ``f`` (n,) ±1.
    flip : float
        Share of rows whose pair reads the other group.
    """

    base: pd.DataFrame
    c: np.ndarray
    construction: str
    noise: dict
    flip: float
    kind: str = "binary"
    n_groups: int = 2
    protected_name: str = "c"

    def __len__(self) -> int:
        return len(self.c)

    @property
    def index(self) -> pd.Index:
        return self.base.index

    def caused(self, c=None) -> pd.DataFrame:
        """``joint_a`` and ``joint_b`` for protected values ``c`` (default: the rows' own), same noise."""
        c = self.c if c is None else np.asarray(c)
        e = 2.0 * c - 1.0
        z1, z2, u, f = (self.noise[k] for k in ("z1", "z2", "u", "f"))
        if self.construction == "sign":
            a, b = z1, e * f * np.sign(z1) * np.abs(z2)
        elif self.construction == "ratio":
            a, b = np.exp(z1), np.exp(RATIO_RHO * e * f * z1 + np.sqrt(1 - RATIO_RHO**2) * z2)
        else:
            a, b = u.astype(np.float64), (u ^ c.astype(np.int64) ^ (f < 0)).astype(np.float64)
        return pd.DataFrame({"joint_a": a, "joint_b": b}, index=self.base.index)

    def frame(self, c=None) -> pd.DataFrame:
        """What a target can see for protected values ``c``: the real block and the pair."""
        return pd.concat([self.base, self.caused(c)], axis=1)

    def subset(self, rows) -> "JointData":
        """The same data restricted to ``rows`` (index array or bool mask), re-indexed 0..n−1."""
        rows = np.asarray(rows)
        return replace(self, base=self.base.iloc[rows].reset_index(drop=True), c=self.c[rows],
                       noise={k: v[rows] for k, v in self.noise.items()})


def make_joint_data(features: pd.DataFrame, *, construction: str, flip: float = 0.1, seed: int = 0,
                    protected_name: str = "c") -> JointData:
    """Draw c and the pair that carries it only jointly on real rows (module docstring).

    Parameters
    ----------
    features : DataFrame of shape (n, p)
        Real rows, no missing values, without columns named ``joint_a`` or ``joint_b``.
    construction : {"sign", "ratio", "xor"}
    flip : float in [0, 0.5)
        Share of rows whose pair reads the other group (0: the pair determines c).
    seed : int
    protected_name : str

    Returns
    -------
    JointData

    Raises
    ------
    InputError
        An unknown construction, ``flip`` outside [0, 0.5), missing values, or a column name already used.
    """
    if construction not in JOINT_CONSTRUCTIONS:
        raise InputError(f"construction must be one of {list(JOINT_CONSTRUCTIONS)}, got {construction!r}")
    if not 0.0 <= flip < 0.5:
        raise InputError(f"flip must be in [0, 0.5), got {flip}")
    frame = features.reset_index(drop=True)
    clash = [col for col in JOINT_COLUMNS if col in frame.columns]
    if clash:
        raise InputError(f"the features already hold columns named {clash}; rename them")
    missing = int(frame.isna().any(axis=1).sum())
    if missing:
        raise InputError(f"the features have {fmt_count(missing)} rows with missing values; drop or impute them")
    rng = np.random.default_rng(seed)
    n = len(frame)
    c = rng.integers(0, 2, n)
    noise = {"z1": rng.standard_normal(n), "z2": rng.standard_normal(n), "u": rng.integers(0, 2, n),
             "f": np.where(rng.random(n) < flip, -1.0, 1.0)}
    return JointData(base=frame, c=c, construction=construction, noise=noise, flip=float(flip),
                     protected_name=protected_name)


def joint_unfair_logit(frame: pd.DataFrame, construction: str, base_logit: np.ndarray | None = None) -> np.ndarray:
    """The family's unfair target: a logit (n,) that reads the pair's interaction, plus ``base_logit``.

    ``sign``: 2.5·tanh(a·b); ``ratio``: 2.5 − 2.5·|log b − log a|; ``xor``: 2.5·(2·(a XOR b) − 1).
    """
    a, b = frame["joint_a"].to_numpy(np.float64), frame["joint_b"].to_numpy(np.float64)
    if construction == "sign":
        z = 2.5 * np.tanh(a * b)
    elif construction == "ratio":
        z = 2.5 - 2.5 * np.abs(np.log(b) - np.log(a))
    else:
        z = 2.5 * (2.0 * np.abs(a - b) - 1.0)
    return z + (0.0 if base_logit is None else base_logit)


def joint_fair_logit(frame: pd.DataFrame, base_logit: np.ndarray | None = None) -> np.ndarray:
    """The family's fair control: a logit (n,) blind to both columns of the pair (``base_logit``, or 0)."""
    return np.zeros(len(frame)) if base_logit is None else np.asarray(base_logit, dtype=np.float64)


def joint_fairness_scores(predict: Callable[[pd.DataFrame], np.ndarray], data: JointData) -> np.ndarray:
    """Ground-truth IFS (n,), probability points: |f(x(c)) − f(x(1 − c))|, ``joint_b`` regenerated, the rest fixed."""
    p = np.asarray(predict(data.frame()), dtype=np.float64)
    return np.abs(np.asarray(predict(data.frame(1 - data.c)), dtype=np.float64) - p)
