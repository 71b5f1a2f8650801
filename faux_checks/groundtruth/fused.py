"""Synthetic data with known bias and ground-truth individual fairness (our reconstruction).

Castiglione et al. 2022 (fAux, RQ1/RQ4) evaluate testers on data built by fusing two real
datasets, D̂ = {(x̂ᵢ, ŷᵢ)} and D̃ = {(x̃ⱼ, ỹⱼ)}: x = f_fus(x̂ᵢ, x̃ⱼ), y = ŷᵢ, c = ỹⱼ, with a
**bias level** b ∈ [0, 1] choosing the pairs (i, j) so that y and c become dependent. Their
generator (Appendix A.7) is not available to us; this module is a documented reconstruction
(docs/method.md, "Ground truth"). The library never reads files: the caller passes the two
datasets (the benchmark loads Adult and Bank Marketing from ``shared/data``).

Generative model (per individual, all draws independent and seeded):

1. y ~ Bernoulli(π) with π = ``positive_rate``; i ~ Uniform{i : ŷᵢ = y} (with replacement).
2. s ~ Bernoulli(b). If s = 1, c = y; otherwise c ~ Bernoulli(π), independent of y.
   So P(c = 1) = π at every b and **corr(y, c) = b** in expectation.
3. j ~ Uniform{j : ỹⱼ = c}; the c-independent latent z̃ = h⁻¹(x̃ⱼ; c) (step 4).
4. The c-driven features are x̃ = h(z̃, c) = μ(c) + σ(c) ⊙ z̃ with μ(c) = μ₀ + c (μ₁ − μ₀),
   σ(c) = σ₀ + c (σ₁ − σ₀), where μ_k, σ_k are the per-class mean and standard deviation of
   D̃'s (standardised) features. h reproduces the real rows exactly at c ∈ {0, 1}, is
   differentiable in c, and ∂x̃/∂c = (μ₁ − μ₀) + (σ₁ − σ₀) ⊙ z̃ per individual.
5. Fusion f_fus: ``"concat"``: x = [x̂, x̃]; ``"outer"``: x = vec([x̂, 1] ⊗ [x̃, 1]) without the
   constant entry (the tensor-fusion layer of Zadeh et al. 2017: it holds x̂, x̃ and all
   products x̂ₐx̃_b), so ∂x/∂c = vec([x̂, 1] ⊗ ∂x̃/∂c).

x̂ is c-independent given y (the z⊥ of Definition 1). Both blocks are standardised with the
full datasets' mean and standard deviation before anything else.

Ground truth for any target f (Definition 1): the individual fairness score
IFS(x) = |f(f_fus(x̂, h(z̃, c))) − f(f_fus(x̂, h(z̃, 1 − c)))|: the change when only the c-driven
part is swapped for the other group's, with z⊥ = (x̂, z̃) fixed. LIC-UB (eq. 5) is exact here
because ∂x/∂c is known in closed form (:meth:`FusedData.dx_dc`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError
from ..method._batching import as_tensor
from ..method.output import TargetOutput, predict_probability, resolve_output_form

__all__ = ["CDrivenMap", "FusedData", "FUSIONS", "fuse", "individual_fairness_scores", "make_fused_data"]

Fusion = Literal["concat", "outer"]
FUSIONS: tuple[str, ...] = ("concat", "outer")


@dataclass(frozen=True)
class CDrivenMap:
    """The c-driven part's generator h(z̃, c) = μ(c) + σ(c) ⊙ z̃, linear in c (our reconstruction).

    Attributes
    ----------
    mean : ndarray of shape (2, d̃)
        Per-class means μ₀, μ₁ of the standardised D̃ features.
    scale : ndarray of shape (2, d̃)
        Per-class standard deviations σ₀, σ₁ (> 0).
    """

    mean: np.ndarray
    scale: np.ndarray

    def __call__(self, z: np.ndarray, c) -> np.ndarray:
        """x̃ = h(z̃, c); z of shape (n, d̃), c scalar or (n,) (any real value); returns (n, d̃)."""
        c = np.broadcast_to(np.asarray(c, dtype=np.float64), (len(z),))[:, None]
        mu = self.mean[0] + c * (self.mean[1] - self.mean[0])
        sd = self.scale[0] + c * (self.scale[1] - self.scale[0])
        return mu + sd * z

    def latent(self, x: np.ndarray, c: np.ndarray) -> np.ndarray:
        """z̃ = h⁻¹(x̃; c) for c ∈ {0, 1}; shape (n, d̃)."""
        c = np.asarray(c, dtype=np.int64)
        return (x - self.mean[c]) / self.scale[c]

    def derivative(self, z: np.ndarray) -> np.ndarray:
        """∂x̃/∂c = (μ₁ − μ₀) + (σ₁ − σ₀) ⊙ z̃, per individual; shape (n, d̃) (independent of c)."""
        return (self.mean[1] - self.mean[0]) + (self.scale[1] - self.scale[0]) * z


def fuse(x_hat: np.ndarray, x_tilde: np.ndarray, fusion: Fusion) -> np.ndarray:
    """f_fus: (n, d̂) and (n, d̃) -> (n, d); concat d = d̂ + d̃, outer d = (d̂ + 1)(d̃ + 1) − 1.

    Outer-product layout: ``x[:, a * (d̃ + 1) + b] = x̂₁[:, a] * x̃₁[:, b]`` with x̂₁ = [x̂, 1],
    x̃₁ = [x̃, 1], and the last (constant) entry dropped.
    """
    if fusion == "concat":
        return np.concatenate([x_hat, x_tilde], axis=1)
    if fusion == "outer":
        n = len(x_hat)
        a = np.concatenate([x_hat, np.ones((n, 1))], axis=1)             # (n, d̂+1)
        b = np.concatenate([x_tilde, np.ones((n, 1))], axis=1)           # (n, d̃+1)
        return (a[:, :, None] * b[:, None, :]).reshape(n, -1)[:, :-1]
    raise InputError(f"fusion must be one of {FUSIONS}, got {fusion!r}")


def _fuse_derivative(x_hat: np.ndarray, dxt_dc: np.ndarray, fusion: Fusion) -> np.ndarray:
    """∂x/∂c of :func:`fuse` given ∂x̃/∂c; (n, d)."""
    n = len(x_hat)
    if fusion == "concat":
        return np.concatenate([np.zeros_like(x_hat), dxt_dc], axis=1)
    a = np.concatenate([x_hat, np.ones((n, 1))], axis=1)
    b = np.concatenate([dxt_dc, np.zeros((n, 1))], axis=1)               # the constant 1 does not move
    return (a[:, :, None] * b[:, None, :]).reshape(n, -1)[:, :-1]


@dataclass(frozen=True)
class FusedData:
    """A fused synthetic dataset with its generator, for ground-truth fairness scores.

    Attributes
    ----------
    X : ndarray of shape (n, d), float32
        Features the target sees (``fusion`` of x̂ and x̃).
    y : ndarray of shape (n,), int64
        Label (from D̂).
    c : ndarray of shape (n,), int64
        Protected attribute (D̃'s label), 0/1.
    x_hat : ndarray of shape (n, d̂), float64
        c-independent block (standardised D̂ features).
    z_tilde : ndarray of shape (n, d̃), float64
        c-independent latent of the c-driven block.
    c_map : CDrivenMap
        h, with x̃ = h(z̃, c).
    fusion : {"concat", "outer"}
    bias : float
    pairs : ndarray of shape (n, 2), int64
        Source row indices (i in D̂, j in D̃).
    feature_names : list of str
    """

    X: np.ndarray
    y: np.ndarray
    c: np.ndarray
    x_hat: np.ndarray
    z_tilde: np.ndarray
    c_map: CDrivenMap
    fusion: Fusion
    bias: float
    pairs: np.ndarray
    feature_names: list

    def __len__(self) -> int:
        return len(self.y)

    def features(self, c=None) -> np.ndarray:
        """X with the protected attribute set to ``c`` (scalar or (n,), any real); (n, d) float32."""
        c = self.c if c is None else c
        return fuse(self.x_hat, self.c_map(self.z_tilde, c), self.fusion).astype(np.float32)

    def swapped(self) -> np.ndarray:
        """Definition 1 counterpart: X with c ↦ 1 − c, z⊥ = (x̂, z̃) fixed; (n, d) float32."""
        return self.features(1 - self.c)

    def dx_dc(self) -> np.ndarray:
        """True ∂x/∂c per individual, shape (n, d, 1), float64 (for LIC-UB)."""
        return _fuse_derivative(self.x_hat, self.c_map.derivative(self.z_tilde), self.fusion)[:, :, None]

    def subset(self, rows) -> "FusedData":
        """The same data restricted to ``rows`` (index array or bool mask)."""
        rows = np.asarray(rows)
        return FusedData(self.X[rows], self.y[rows], self.c[rows], self.x_hat[rows], self.z_tilde[rows], self.c_map,
                         self.fusion, self.bias, self.pairs[rows], self.feature_names)


def _numeric_block(data, name: str) -> tuple[np.ndarray, list[str]]:
    if isinstance(data, pd.DataFrame):
        bad = [c for c in data.columns if not pd.api.types.is_numeric_dtype(data[c]) or pd.api.types.is_bool_dtype(data[c])]
        if bad:
            raise InputError(f"{name} has non-numeric columns {bad[:10]}; encode them as numbers first")
        names = [str(c) for c in data.columns]
        arr = data.to_numpy(dtype=np.float64)
    else:
        arr = np.asarray(data, dtype=np.float64)
        if arr.ndim != 2:
            raise InputError(f"{name} must have shape (n, d), got {arr.shape}")
        names = [f"{name}{i}" for i in range(arr.shape[1])]
    if not np.isfinite(arr).all():
        raise InputError(f"{name} holds {fmt_count(int((~np.isfinite(arr)).any(axis=1).sum()))} rows with NaN/inf")
    sd = arr.std(axis=0)
    if (sd == 0).any():
        raise InputError(f"{name} has constant columns {[names[i] for i in np.flatnonzero(sd == 0)]}; drop them")
    return (arr - arr.mean(axis=0)) / sd, names


def _binary_labels(labels, n: int, name: str) -> np.ndarray:
    lab = np.asarray(labels)
    if len(lab) != n:
        raise InputError(f"{name} has {fmt_count(len(lab))} labels for {fmt_count(n)} rows")
    if not np.isin(lab, (0, 1)).all():
        raise InputError(f"{name} must hold 0/1 labels; found {np.unique(lab)[:10].tolist()}")
    lab = lab.astype(np.int64)
    if lab.min() == lab.max():
        raise InputError(f"{name} has a single class; both 0 and 1 are needed")
    return lab


def make_fused_data(x_hat, y_hat, x_tilde, y_tilde, *, n: int, bias: float, fusion: Fusion = "concat",
                    positive_rate: float = 0.5, seed: int = 0) -> FusedData:
    """Draw n individuals from two real datasets with a chosen dependence between y and c.

    Parameters
    ----------
    x_hat : DataFrame or ndarray of shape (n̂, d̂)
        Numeric features of D̂ (the c-independent block); standardised here.
    y_hat : array of shape (n̂,)
        0/1 labels of D̂: the label y.
    x_tilde : DataFrame or ndarray of shape (ñ, d̃)
        Numeric features of D̃ (the c-driven block); standardised here.
    y_tilde : array of shape (ñ,)
        0/1 labels of D̃: the protected attribute c.
    n : int
        Individuals to draw (rows are drawn with replacement).
    bias : float in [0, 1]
        b: probability that c is copied from y (so corr(y, c) = b in expectation).
    fusion : {"concat", "outer"}
    positive_rate : float in (0, 1)
        π = P(y = 1) = P(c = 1).
    seed : int

    Returns
    -------
    FusedData

    Raises
    ------
    InputError
        Bias or rate out of range, non-numeric or constant columns, labels other than 0/1, a
        class with fewer than 2 rows in D̃.

    Notes
    -----
    Our reconstruction of Castiglione et al. 2022, Appendix A.7 (not available); see the module
    docstring for the generative model.
    """
    if not 0.0 <= bias <= 1.0:
        raise InputError(f"bias must be in [0, 1], got {bias}")
    if not 0.0 < positive_rate < 1.0:
        raise InputError(f"positive_rate must be in (0, 1), got {positive_rate}")
    if int(n) != n or n < 1:
        raise InputError(f"n must be a positive integer, got {n}")
    if fusion not in FUSIONS:
        raise InputError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
    xh, names_h = _numeric_block(x_hat, "x_hat")
    xt, names_t = _numeric_block(x_tilde, "x_tilde")
    yh = _binary_labels(y_hat, len(xh), "y_hat")
    yt = _binary_labels(y_tilde, len(xt), "y_tilde")
    counts = np.bincount(yt, minlength=2)
    if (counts < 2).any():
        raise InputError(f"y_tilde needs at least 2 rows per class, got counts {counts.tolist()}")
    mean = np.stack([xt[yt == k].mean(axis=0) for k in (0, 1)])          # (2, d̃)
    scale = np.stack([xt[yt == k].std(axis=0) for k in (0, 1)])          # (2, d̃)
    scale = np.where(scale > 0, scale, 1e-6)
    c_map = CDrivenMap(mean=mean, scale=scale)

    rng = np.random.default_rng(seed)
    y = (rng.random(n) < positive_rate).astype(np.int64)
    coupled = rng.random(n) < bias
    c = np.where(coupled, y, (rng.random(n) < positive_rate).astype(np.int64))
    by_y = [np.flatnonzero(yh == k) for k in (0, 1)]
    by_c = [np.flatnonzero(yt == k) for k in (0, 1)]
    i = np.where(y == 1, rng.choice(by_y[1], n), rng.choice(by_y[0], n))
    j = np.where(c == 1, rng.choice(by_c[1], n), rng.choice(by_c[0], n))
    x_hat_rows = xh[i]
    z = c_map.latent(xt[j], c)
    X: np.ndarray = fuse(x_hat_rows, c_map(z, c), fusion).astype(np.float32)
    if fusion == "concat":
        names = names_h + names_t
    else:
        names = [f"{a}*{b}" for a in names_h + ["1"] for b in names_t + ["1"]][:-1]
    return FusedData(X=X, y=y, c=c, x_hat=x_hat_rows, z_tilde=z, c_map=c_map, fusion=fusion, bias=float(bias),
                     pairs=np.stack([i, j], axis=1), feature_names=names)


def individual_fairness_scores(target_model, data: FusedData, *, output: TargetOutput = TargetOutput(),  # noqa: B008 - frozen dataclass, immutable default
                               chunk_size: int = 65_536) -> np.ndarray:
    """Ground-truth IFS of each individual: |f(x) − f(x with c swapped, z⊥ fixed)| (Definition 1).

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
        Takes ``data.X``'s features.
    data : FusedData
    output : TargetOutput

    Returns
    -------
    ndarray of shape (n,), float64
        Change of P(y = target_class) in [0, 1]; exactly 0 for a target that ignores the
        c-driven features.

    Notes
    -----
    Castiglione et al. 2022, Definition 1; the swap is our generator's (module docstring).
    """
    X = as_tensor(data.X)
    resolved = resolve_output_form(target_model, X[:256], output)
    p = predict_probability(target_model, X, resolved, chunk_size=chunk_size)
    p_swap = predict_probability(target_model, as_tensor(data.swapped()), resolved, chunk_size=chunk_size)
    return np.abs(p - p_swap)
