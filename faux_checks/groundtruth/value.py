"""A regression target with a known per-person counterfactual change: a credit limit on real Adult rows.

The rows are :func:`~faux_checks.groundtruth.proxy.make_proxy_data` on bundled UCI Adult rows (binary c drawn
independently of the real features, four proxies generated from c with stored noise). The credit limit, in EUR, is

    limit(x, c) = f(x) − β · c · g(x)

with f and g functions of the real (legitimate) numeric columns only (:data:`BASE_WEIGHTS`, :data:`GAIN_WEIGHTS`),
c ∈ {0, 1} the protected group and β ≥ 0 the unfairness. Changing only c (the proxies regenerated with the same
noise, the legitimate columns fixed) moves the limit by exactly β · g(x): with δ in EUR, the true flagged share
is mean(β · g(x) > δ) (Definition 1 of arXiv 2210.06288 with the output in its own unit). β = 0 is the fair
control (no one's limit depends on c), β = 0.5 the unfair target of ``docs/benchmark.md``.

Read against a business cut-off t (a limit of t EUR or more granted), a person crosses it when limit(x, c) and
limit(x, 1 − c) lie on different sides of t: exactly when the two values straddle t, known per person in
closed form (:meth:`ValueData.true_crossing`); the true crossing share is its mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..errors import InputError
from .proxy import ProxyData, make_proxy_data

__all__ = ["BASE_WEIGHTS", "GAIN_WEIGHTS", "VALUE_COLUMNS", "ValueData", "exact_limit_target", "make_value_data",
           "value_crossing_truth", "value_fairness_scores"]

#: The real Adult columns the credit limit reads (numeric, the legitimate block).
VALUE_COLUMNS: tuple[str, ...] = ("age", "education-num", "hours-per-week", "capital-gain", "capital-loss")
#: f(x) = 2,000 EUR + Σ w · column: the part of the limit that does not depend on c.
BASE_WEIGHTS = {"age": 40.0, "education-num": 300.0, "hours-per-week": 50.0, "capital-gain": 0.05, "capital-loss": 0.0}
#: g(x) = max(0, Σ w · column): the limit's gap between the groups, per person (EUR at β = 1).
GAIN_WEIGHTS = {"age": 9.0, "education-num": 50.0, "hours-per-week": 5.0, "capital-gain": 0.0, "capital-loss": 0.0}
_BASE_INTERCEPT = 2_000.0


@dataclass(frozen=True)
class ValueData:
    """The credit-limit generator's rows, its β and its exact counterfactual (module docstring).

    Attributes
    ----------
    proxy : ProxyData
        The legitimate Adult columns, c and its proxies.
    beta : float
        β ≥ 0, the share of g(x) the disadvantaged group (c = 1, ``g1``) loses.
    """

    proxy: ProxyData
    beta: float

    def __len__(self) -> int:
        return len(self.proxy)

    @property
    def c(self) -> np.ndarray:
        """The protected group of each row, int64 (n,) in {0, 1}."""
        return self.proxy.c

    def frame(self, c=None) -> pd.DataFrame:
        """What the target sees: legitimate columns, proxies and the protected column ``c`` (``g0``/``g1``)."""
        c = self.c if c is None else np.asarray(c)
        out = self.proxy.frame(c)
        out[self.proxy.protected_name] = np.asarray(["g0", "g1"], dtype=object)[c]
        return out

    def gain(self) -> np.ndarray:
        """g(x), EUR (n,), ≥ 0."""
        return gain_of(self.proxy.features)

    def limit(self, c=None) -> np.ndarray:
        """limit(x, c) = f(x) − β · c · g(x), EUR (n,)."""
        c = self.c if c is None else np.asarray(c)
        return base_of(self.proxy.features) - self.beta * c * self.gain()

    def true_change(self) -> np.ndarray:
        """|limit(x, 1 − c) − limit(x, c)| = β · g(x), EUR (n,): each person's exact counterfactual change."""
        return self.beta * self.gain()

    def true_share(self, delta: float) -> float:
        """The share of people whose limit moves by more than ``delta`` EUR if only c changed."""
        return float(np.mean(self.true_change() > delta))

    def true_crossing(self, cutoff: float) -> np.ndarray:
        """Bool (n,): limit(x, c) and limit(x, 1 − c) lie on different sides of ``cutoff`` EUR (sides ``>= cutoff``
        and ``< cutoff``): each person's exact crossing of the cut-off if only c changed."""
        return (self.limit() >= cutoff) != (self.limit(1 - self.c) >= cutoff)

    def true_crossing_share(self, cutoff: float) -> float:
        """The share of people whose limit crosses ``cutoff`` EUR if only c changed (:meth:`true_crossing`)."""
        return float(np.mean(self.true_crossing(cutoff)))


def base_of(features: pd.DataFrame) -> np.ndarray:
    """f(x), EUR (n,), from :data:`BASE_WEIGHTS`."""
    return _BASE_INTERCEPT + sum(w * features[k].to_numpy(np.float64) for k, w in BASE_WEIGHTS.items())


def gain_of(features: pd.DataFrame) -> np.ndarray:
    """g(x), EUR (n,), from :data:`GAIN_WEIGHTS`."""
    return np.maximum(0.0, sum(w * features[k].to_numpy(np.float64) for k, w in GAIN_WEIGHTS.items()))


def make_value_data(adult: pd.DataFrame, *, n: int = 3_000, beta: float = 0.5, seed: int = 0) -> ValueData:
    """The credit-limit rows: ``n`` Adult rows (seeded sample), c and proxies injected, β set.

    Parameters
    ----------
    adult : DataFrame
        :func:`faux_checks.inputs.datasets.load_adult` (the :data:`VALUE_COLUMNS`, ``fnlwgt`` and ``income``).
    n : int
        Rows sampled (without replacement, seeded).
    beta : float
        β ≥ 0 (0: fair).
    seed : int

    Raises
    ------
    InputError
        β < 0, ``n`` larger than the rows given, or a column missing.
    """
    if beta < 0:
        raise InputError(f"beta must be >= 0 (the share of g(x) the disadvantaged group loses), got {beta}")
    missing = [c for c in (*VALUE_COLUMNS, "fnlwgt", "income") if c not in adult.columns]
    if missing:
        raise InputError(f"the Adult rows lack {missing}; pass faux_checks.inputs.datasets.load_adult()")
    if not 0 < n <= len(adult):
        raise InputError(f"n = {n} rows asked of {len(adult):,}")
    rows = np.random.default_rng(seed).choice(len(adult), size=n, replace=False)
    sample = adult.iloc[np.sort(rows)].reset_index(drop=True)
    proxy = make_proxy_data(sample[[*VALUE_COLUMNS, "fnlwgt"]], sample["income"].to_numpy(), legit_column="fnlwgt",
                            kind="binary", seed=seed)
    return ValueData(proxy=proxy, beta=float(beta))


def exact_limit_target(data: ValueData, spec) -> Callable[[np.ndarray], np.ndarray]:
    """The exact credit limit on the encoded matrix of ``spec`` (a :class:`~faux_checks.inputs.tabular.FeatureSpec`
    over :meth:`ValueData.frame`'s columns): X (n, d) -> limit (n,), EUR. Wrap it as
    ``ForwardOnlyTarget(fn, access=..., output_form="value")``.

    Raises
    ------
    InputError
        The spec lacks a column the limit reads, or encodes c other than one-hot ``g0``/``g1``.
    """
    names = spec.feature_names
    needed = [*VALUE_COLUMNS, f"{data.proxy.protected_name}=g1"]
    absent = [c for c in needed if c not in names]
    if absent:
        raise InputError(f"the feature spec lacks {absent}; fit it on ValueData.frame() with c categorical")
    encodings = {e.name: e for e in spec.columns}

    def column(X: np.ndarray, name: str) -> np.ndarray:
        enc = encodings[name]
        x: np.ndarray = X[:, names.index(name)].astype(np.float64)
        return x * (enc.std or 1.0) + enc.mean if enc.kind == "numeric" else x

    def predict(X: np.ndarray) -> np.ndarray:
        frame = pd.DataFrame({k: column(X, k) for k in VALUE_COLUMNS})
        c: np.ndarray = X[:, names.index(f"{data.proxy.protected_name}=g1")].astype(np.float64)
        return base_of(frame) - data.beta * c * gain_of(frame)

    return predict


def value_crossing_truth(predict: Callable[[pd.DataFrame], np.ndarray], data: ValueData, cutoff: float) -> np.ndarray:
    """Ground truth for any target: bool (n,), f(x(c)) and f(x(1 − c)) on different sides of ``cutoff`` (sides
    ``>= cutoff`` and ``< cutoff``; proxies regenerated with the same noise)."""
    now = np.asarray(predict(data.frame()), dtype=np.float64)
    other = np.asarray(predict(data.frame(1 - data.c)), dtype=np.float64)
    return (now >= cutoff) != (other >= cutoff)


def value_fairness_scores(predict: Callable[[pd.DataFrame], np.ndarray], data: ValueData) -> np.ndarray:
    """Ground truth for any target: |f(x(1 − c)) − f(x(c))| (n,), in the target's unit (proxies regenerated)."""
    now = np.asarray(predict(data.frame()), dtype=np.float64)
    return np.abs(np.asarray(predict(data.frame(1 - data.c)), dtype=np.float64) - now)
