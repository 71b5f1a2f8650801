"""Proxy injection on real data: ground truth for testers where discrimination runs through proxies.

Real rows give the legitimate features (the c-independent z⊥ of Definition 1) and the label; a
protected attribute c is drawn independently of them, and four proxies are generated from c by
known mechanisms with stored noise. Changing c and regenerating the proxies with the *same*
noise is the exact counterfactual of Definition 1, so every individual's true individual fairness
score (IFS) is known for any target model. Labels get a historical-bias level: a share of the
disadvantaged group's favourable labels is recorded as unfavourable, which a target trained on
them can only reproduce through the proxies.

Generative model (our construction; all draws seeded):

- c: binary (0/1, uniform), multi-class (m groups, uniform) or continuous (standard normal);
  its embedding e(c) ∈ ℝ²: binary (2c − 1, 2c − 1); m groups the unit circle at angle 2πc/m;
  continuous (c, c).
- ``proxy_linear``    = s_lin · e₁(c) + ε₁                        (continuous, linear)
- ``proxy_nonlinear`` = exp(½ (s_nl · e₂(c) + ε₂))                 (continuous, multiplicative)
- ``proxy_category``  = argmax_k (s_cat · W_k · e(c) + G_k)        (one of 4 levels; G Gumbel noise,
  W_k on the unit circle: a categorical proxy, one-hot for the target)
- ``proxy_legit``     = z_y + s_leg · e₁(c) + ½ ε₄                  (a legitimate feature z_y, taken
  from the real data and removed from the legitimate block, recorded with a group-dependent bias:
  a proxy that is also predictive of y)
- labels: the real label y; each favourable label (1) of an individual is recorded as 0 with
  probability ``bias · w(c)``, w = c (binary), c/(m − 1) (multi-class), Φ(c) (continuous).

IFS(x) = max over counterfactual values c′ of |f(x(c)) − f(x(c′))|, with c′ every other group
(binary, multi-class) or c ± 1 standard deviation (continuous), all noise and z⊥ fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Protocol

import numpy as np
import pandas as pd
from scipy.special import ndtr

from .._validation import fmt_count
from ..errors import InputError
from ..kinds import KINDS, Kind

__all__ = ["check_kind_and_bias", "protected_embedding", "DEFAULT_STRENGTH", "disadvantage", "InjectedProtected", "make_proxy_data", "PROXY_COLUMNS",
           "proxy_fairness_scores", "ProxyData"]

PROXY_COLUMNS: tuple[str, ...] = ("proxy_linear", "proxy_nonlinear", "proxy_category", "proxy_legit")
CATEGORY_LEVELS: tuple[str, ...] = ("A", "B", "C", "D")
#: Mechanism strengths s (measured: binary c, held-out aux ROC-AUC 0.88 on Adult and law school rows).
DEFAULT_STRENGTH = {"linear": 0.35, "nonlinear": 0.35, "category": 0.56, "legit": 0.35}



def check_kind_and_bias(kind: str, bias: float, n_groups: int) -> None:
    """Refuse a generator's protected-attribute kind, label bias or group count out of range.

    Parameters
    ----------
    kind : {"binary", "multiclass", "continuous"}
    bias : float
        Label bias, in [0, 1].
    n_groups : int
        Groups of a multi-class attribute (at least 3).

    Raises
    ------
    InputError
        The first setting out of range, named with the value given.
    """
    if kind not in KINDS:
        raise InputError(f"kind must be 'binary', 'multiclass' or 'continuous', got {kind!r}")
    if not 0.0 <= bias <= 1.0:
        raise InputError(f"bias must be in [0, 1], got {bias}")
    if kind == "multiclass" and n_groups < 3:
        raise InputError(f"a multi-class protected attribute needs n_groups >= 3, got {n_groups}")


def protected_embedding(c: np.ndarray, kind: str, n_groups: int) -> np.ndarray:
    """e(c), shape (n, 2)."""
    c = np.asarray(c)
    if kind == "binary":
        e = 2.0 * c - 1.0
        return np.stack([e, e], axis=1)
    if kind == "multiclass":
        angle = 2 * np.pi * c / n_groups
        return np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return np.stack([c, c], axis=1).astype(np.float64)


def disadvantage(c: np.ndarray, kind: str, n_groups: int) -> np.ndarray:
    """w(c) in [0, 1]: how strongly the label bias hits each individual."""
    if kind == "binary":
        return np.asarray(c, dtype=np.float64)
    if kind == "multiclass":
        return np.asarray(c, dtype=np.float64) / (n_groups - 1)
    return ndtr(np.asarray(c, dtype=np.float64))


class _HasInjectedProtected(Protocol):
    """What :class:`InjectedProtected` reads from the dataset it is mixed into (frozen dataclass fields, ``index`` a property: read-only)."""

    @property
    def c(self) -> np.ndarray: ...
    @property
    def kind(self) -> str: ...
    @property
    def n_groups(self) -> int: ...
    @property
    def protected_name(self) -> str: ...
    @property
    def index(self) -> pd.Index: ...


class InjectedProtected:
    """The protected attribute of injected data as a column and its counterfactual values (shared by the families).

    Needs ``c``, ``kind``, ``n_groups``, ``protected_name`` and the rows' ``index``.
    """

    def protected(self: _HasInjectedProtected) -> pd.Series:
        """The protected attribute as a column (groups named ``g0``, ``g1``, … ; continuous as floats)."""
        if self.kind == "continuous":
            return pd.Series(self.c, name=self.protected_name, index=self.index)
        return pd.Series(np.asarray([f"g{k}" for k in range(self.n_groups)], dtype=object)[self.c],
                         name=self.protected_name, index=self.index)

    def counterfactual_protected(self: _HasInjectedProtected) -> list[np.ndarray]:
        """The counterfactual values c′ of Definition 1: every other group, or c ± 1 sd."""
        if self.kind == "continuous":
            return [self.c + 1.0, self.c - 1.0]
        return [(self.c + k) % self.n_groups for k in range(1, self.n_groups)]


@dataclass(frozen=True)
class ProxyData(InjectedProtected):
    """A proxy-injection dataset with its generator (:func:`make_proxy_data`).

    Attributes
    ----------
    features : DataFrame of shape (n, p)
        The legitimate block z⊥ (real rows), without the column behind ``proxy_legit``.
    c : ndarray of shape (n,)
        Protected attribute: int64 group index, or float64 (continuous).
    kind : {"binary", "multiclass", "continuous"}
    n_groups : int
        m (2 for binary, 0 for continuous).
    legit_latent : ndarray of shape (n,)
        z_y, the standardised real feature behind ``proxy_legit``.
    noise : dict of ndarray
        ε₁, ε₂ (n,), Gumbel G (n, 4), ε₄ (n,).
    strength : dict of float
    y : ndarray of shape (n,), int64
        Labels with the historical bias.
    y_recorded : ndarray of shape (n,), int64
        The real labels.
    bias : float
    """

    features: pd.DataFrame
    c: np.ndarray
    kind: str
    n_groups: int
    legit_latent: np.ndarray
    noise: dict
    strength: dict
    y: np.ndarray
    y_recorded: np.ndarray
    bias: float
    legit_column: str = ""
    protected_name: str = "c"
    _levels: tuple = field(default=CATEGORY_LEVELS, repr=False)

    def __len__(self) -> int:
        return len(self.c)

    @property
    def admissible_columns(self) -> list[str]:
        """The legitimate block's columns (what a policy would declare admissible)."""
        return [str(col) for col in self.features.columns]

    def proxies(self, c=None) -> pd.DataFrame:
        """The four proxies for protected values ``c`` (default: the individuals' own), same noise."""
        c = self.c if c is None else np.asarray(c)
        e = protected_embedding(c, self.kind, self.n_groups)
        s, eps = self.strength, self.noise
        angle = 2 * np.pi * np.arange(len(self._levels)) / len(self._levels) + 0.3
        W = np.stack([np.cos(angle), np.sin(angle)], axis=1)                    # (K, 2)
        category = np.asarray(self._levels, dtype=object)[(s["category"] * e @ W.T + eps["category"]).argmax(axis=1)]
        return pd.DataFrame({
            "proxy_linear": s["linear"] * e[:, 0] + eps["linear"],
            "proxy_nonlinear": np.exp(0.5 * (s["nonlinear"] * e[:, 1] + eps["nonlinear"])),
            "proxy_category": category,
            "proxy_legit": self.legit_latent + s["legit"] * e[:, 0] + 0.5 * eps["legit"],
        }, index=self.features.index)

    def frame(self, c=None) -> pd.DataFrame:
        """Legitimate features and proxies (what a target sees) for protected values ``c``."""
        return pd.concat([self.features, self.proxies(c)], axis=1)

    @property
    def index(self) -> pd.Index:
        return self.features.index

    def subset(self, rows) -> "ProxyData":
        """The same data restricted to ``rows`` (index array or bool mask), re-indexed 0..n−1."""
        rows = np.asarray(rows)
        return replace(self, features=self.features.iloc[rows].reset_index(drop=True), c=self.c[rows],
                       legit_latent=self.legit_latent[rows], noise={k: v[rows] for k, v in self.noise.items()},
                       y=self.y[rows], y_recorded=self.y_recorded[rows])


def make_proxy_data(features: pd.DataFrame, labels, *, legit_column: str, kind: Kind = "binary", n_groups: int = 3,
                    bias: float = 0.0, strength: dict | None = None, seed: int = 0,
                    protected_name: str = "c") -> ProxyData:
    """Inject a protected attribute and its proxies into real rows (module docstring).

    Parameters
    ----------
    features : DataFrame of shape (n, p)
        Real rows: the legitimate features, numeric and categorical; no missing values.
    labels : array of shape (n,)
        Their real 0/1 label.
    legit_column : str
        A numeric column of ``features`` that is moved into ``proxy_legit`` (and removed from the
        legitimate block).
    kind : {"binary", "multiclass", "continuous"}
    n_groups : int
        m for multi-class (≥ 3).
    bias : float in [0, 1]
        Historical-bias level of the labels.
    strength : dict, optional
        Overrides of :data:`DEFAULT_STRENGTH` (keys linear, nonlinear, category, legit).
    seed : int
    protected_name : str
        Name of the protected column in :meth:`ProxyData.protected`.

    Returns
    -------
    ProxyData

    Raises
    ------
    InputError
        Bad kind, bias, strength keys, labels other than 0/1, a missing or non-numeric
        ``legit_column``, missing values, or a proxy column name already in ``features``.
    """
    check_kind_and_bias(kind, bias, n_groups)
    unknown = set(strength or {}) - set(DEFAULT_STRENGTH)
    if unknown:
        raise InputError(f"unknown strength keys {sorted(unknown)}; known: {sorted(DEFAULT_STRENGTH)}")
    frame = features.reset_index(drop=True)
    if legit_column not in frame.columns or not pd.api.types.is_numeric_dtype(frame[legit_column]):
        raise InputError(f"legit_column '{legit_column}' must be a numeric column of the features; "
                         f"columns: {list(map(str, frame.columns))}")
    clash = [p for p in PROXY_COLUMNS if p in frame.columns]
    if clash:
        raise InputError(f"the features already hold columns named {clash}; rename them")
    missing = int(frame.isna().any(axis=1).sum())
    if missing:
        raise InputError(f"the features have {fmt_count(missing)} rows with missing values; drop or impute them")
    y = np.asarray(labels)
    if len(y) != len(frame) or not np.isin(y, (0, 1)).all():
        raise InputError(f"labels must be {fmt_count(len(frame))} values in {{0, 1}}")
    rng = np.random.default_rng(seed)
    n = len(frame)
    m = {"binary": 2, "multiclass": n_groups, "continuous": 0}[kind]
    c = rng.standard_normal(n) if kind == "continuous" else rng.integers(0, m, n)
    noise = {"linear": rng.standard_normal(n), "nonlinear": rng.standard_normal(n),
             "category": rng.gumbel(size=(n, len(CATEGORY_LEVELS))), "legit": rng.standard_normal(n)}
    z = frame[legit_column].to_numpy(dtype=np.float64)
    z = (z - z.mean()) / (z.std() or 1.0)
    y_recorded = y.astype(np.int64)
    suppressed = (y_recorded == 1) & (rng.random(n) < bias * disadvantage(c, kind, m))
    return ProxyData(features=frame.drop(columns=[legit_column]), c=c, kind=kind, n_groups=m, legit_latent=z,
                     noise=noise, strength={**DEFAULT_STRENGTH, **(strength or {})},
                     y=np.where(suppressed, 0, y_recorded), y_recorded=y_recorded, bias=float(bias),
                     legit_column=legit_column, protected_name=protected_name)


def proxy_fairness_scores(predict: Callable[[pd.DataFrame], np.ndarray], data: ProxyData) -> np.ndarray:
    """Ground-truth IFS of every individual: max over c′ of |f(x(c)) − f(x(c′))| (Definition 1).

    Parameters
    ----------
    predict : callable
        DataFrame (legitimate features and proxies) -> P(y = 1), ndarray of shape (n,).
    data : ProxyData

    Returns
    -------
    ndarray of shape (n,), float64, in probability points.
    """
    p = np.asarray(predict(data.frame()), dtype=np.float64)
    changes = [np.abs(np.asarray(predict(data.frame(c)), dtype=np.float64) - p)
               for c in data.counterfactual_protected()]
    return np.max(changes, axis=0)
