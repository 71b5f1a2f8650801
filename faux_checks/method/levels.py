"""The counterfactual level of a categorical (one-hot) feature: who switches level, and to which, when c changes.

A categorical proxy changes by jumps: a share of the people at a level move to another level, the rest
keep theirs. Moving the one-hot values continuously (the swap reading's soft move) spreads the jump over
everyone (a person gets 30% of another level) and under-reads a target that responds to the level;
snapping to the largest value moves nobody or everybody. This module reads the jump itself:

1. **A level model** P(level | admissible features, c): a multinomial logit per free one-hot group, fitted
   on the reference rows (:func:`fit_level_model`). For two groups a and b it gives each person's level
   distribution in their own group and in the other, among people with the same admissible features.
2. **Rank preservation** (the same principle as the quantile matching of the aux output,
   :mod:`faux_checks.method.swap`): the levels are ordered by how much more frequent they are in b than in a
   for this person (the model's log-likelihood ratio), and a person keeps their rank: the
   comonotone coupling of the two distributions along that order (:func:`comonotone_transition`). A person
   at level k moves to level j with the probability that their (uniform) position within k's stretch of
   group a's CDF falls into j's stretch of group b's CDF. An ordered proxy (a latent score cut into
   levels, c shifting the score) is read exactly: its likelihood ratio is monotone in the order.
3. **Configurations**: the joint levels of several groups, independent given the person, enumerated with
   their probabilities (:func:`configurations`), so that the target is read at each configuration (a few
   forward passes) and the score is a distribution: the expected change and the probability that the
   change exceeds δ.

Our reading; evidence in docs/benchmark.md. Every function here is pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from .._validation import fmt_count
from ..errors import InputError

__all__ = ["LevelModel", "MAX_CONFIGURATIONS", "comonotone_transition", "comonotone_transition_t", "configurations",
           "fit_level_model", "fit_level_models", "gumbel_transition", "gumbel_transition_sampled", "gumbel_transition_t"]

#: Level configurations kept per individual, and the smallest level probability enumerated.
MAX_CONFIGURATIONS = 8
MIN_LEVEL_PROBABILITY = 0.01
#: L2 penalty of the multinomial logit (per row, on the standardised admissible features and c).
LEVEL_RIDGE = 1e-3


@dataclass(frozen=True)
class LevelModel:
    """P(level of one one-hot group | admissible features, c): a multinomial logit (:func:`fit_level_model`).

    One logit per protected group (binary, multi-class): the admissible features may change the level
    distribution differently in each group (married men are husbands, married women wives). A continuous c
    enters with its interactions: logits = W₀·[1, A] + c̃·W₁·[1, A], c̃ the standardised c.

    Attributes
    ----------
    positions : ndarray of shape (K,), int64
        The group's encoded positions in the aux input space (one per level).
    weights : ndarray of shape (G, 1 + d_A, K)
        G = m logits per group, or G = 2 (base and c-slope) for a continuous c.
    a_mean, a_scale : ndarray of shape (d_A,)
        Standardisation of the admissible features.
    c_mean, c_sd : float
        Standardisation of a continuous c (0 and 1 otherwise).
    kind : {"binary", "multiclass", "continuous"}
    """

    positions: np.ndarray
    weights: np.ndarray
    a_mean: np.ndarray
    a_scale: np.ndarray
    c_mean: float
    c_sd: float
    kind: str

    def _design(self, x_admissible: np.ndarray) -> np.ndarray:
        x = np.asarray(x_admissible, dtype=np.float64)
        x = x.reshape(len(x), len(self.a_mean))                               # (b, d_A), d_A may be 0
        return np.column_stack([np.ones(len(x)), (x - self.a_mean) / self.a_scale])

    def logits(self, x_admissible: np.ndarray, c) -> np.ndarray:
        """(b, K) level logits of rows with admissible features (b, d_A) and protected values c (b,)."""
        design = self._design(x_admissible)
        c = np.asarray(c)
        if self.kind == "continuous":
            z = ((c.astype(np.float64) - self.c_mean) / self.c_sd)[:, None]
            return design @ self.weights[0] + z * (design @ self.weights[1])
        out = np.empty((len(design), self.weights.shape[2]))
        c = c.astype(np.int64)
        for g in np.unique(c):
            sel = c == g
            out[sel] = design[sel] @ self.weights[g]
        return out

    def probabilities(self, x_admissible: np.ndarray, c) -> np.ndarray:
        """(b, K) level probabilities of rows with admissible features (b, d_A) and protected values c (b,)."""
        logits = self.logits(x_admissible, c)
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)

    def logits_t(self, x_admissible: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """:meth:`logits` in torch on the rows' device: (b, d_A) float64, c (b,) -> (b, K) float64 there.

        c: group indices (int64) or, continuous, values (float64), on the same device. Every group's logits are
        formed for every row and the row's own kept (masks, no np.unique: no transfer to the host).
        """
        dev = x_admissible.device
        cache = self.__dict__.setdefault("_device_cache", {})                 # frozen dataclass: no __setattr__
        if str(dev) not in cache:
            cache[str(dev)] = tuple(torch.as_tensor(a, dtype=torch.float64, device=dev)
                                    for a in (self.weights, self.a_mean, self.a_scale))
        weights, a_mean, a_scale = cache[str(dev)]
        x = x_admissible.to(torch.float64).reshape(len(x_admissible), len(self.a_mean))
        design = torch.cat([torch.ones((len(x), 1), dtype=torch.float64, device=dev), (x - a_mean) / a_scale], dim=1)
        if self.kind == "continuous":
            z = ((c.to(torch.float64) - self.c_mean) / self.c_sd)[:, None]
            return design @ weights[0] + z * (design @ weights[1])
        out = torch.zeros((len(design), weights.shape[2]), dtype=torch.float64, device=dev)
        for g in range(weights.shape[0]):
            out = torch.where((c == g)[:, None], design @ weights[g], out)
        return out

    def probabilities_t(self, x_admissible: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """:meth:`probabilities` in torch on the rows' device ((b, d_A), (b,) -> (b, K) float64; :meth:`logits_t`)."""
        logits = self.logits_t(x_admissible, c)
        p = torch.exp(logits - logits.max(dim=1, keepdim=True).values)
        return p / p.sum(dim=1, keepdim=True)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_device_cache", None)
        return state

    def to_dict(self) -> dict:
        return {"positions": self.positions.tolist(), "weights": self.weights.tolist(), "a_mean": self.a_mean.tolist(),
                "a_scale": self.a_scale.tolist(), "c_mean": self.c_mean, "c_sd": self.c_sd, "kind": self.kind}

    @classmethod
    def from_dict(cls, payload: dict) -> "LevelModel":
        return cls(positions=np.asarray(payload["positions"], dtype=np.int64),
                   weights=np.asarray(payload["weights"], dtype=np.float64),
                   a_mean=np.asarray(payload["a_mean"], dtype=np.float64),
                   a_scale=np.asarray(payload["a_scale"], dtype=np.float64), c_mean=float(payload["c_mean"]),
                   c_sd=float(payload["c_sd"]), kind=payload["kind"])


def _fit_logit(design: torch.Tensor, target: torch.Tensor, K: int, *, max_iter: int) -> np.ndarray:
    """Penalised multinomial logit (1 + p, K) by L-BFGS, the intercepts started at the log frequencies."""
    counts = np.bincount(target.numpy(), minlength=K) + 0.5
    W = torch.zeros((design.shape[1], K), dtype=torch.float64)
    W[0] = torch.as_tensor(np.log(counts / counts.sum()))
    W.requires_grad_(True)
    opt = torch.optim.LBFGS([W], max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(design @ W, target) + LEVEL_RIDGE * (W[1:] ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return W.detach().numpy().copy()


def fit_level_model(X_ref, c_ref, positions, *, admissible, kind: str, n_groups: int = 2,
                    max_iter: int = 100) -> LevelModel:
    """Fit P(level | admissible features, c) for one one-hot group by penalised maximum likelihood.

    Parameters
    ----------
    X_ref : ndarray of shape (n, d)
        Reference rows in the aux input space.
    c_ref : ndarray of shape (n,)
        Their protected attribute (group index or continuous value).
    positions : array of shape (K,)
        The group's encoded positions (one-hot: one 1 per row).
    admissible : bool array of shape (d,)
        The admissible features the model conditions on.
    kind : {"binary", "multiclass", "continuous"}
    n_groups : int
        m (binary 2).
    max_iter : int
        L-BFGS iterations (float64).

    Returns
    -------
    LevelModel

    Raises
    ------
    InputError
        Fewer than 2 rows, or a protected group without reference rows.
    """
    X = np.asarray(X_ref, dtype=np.float64)
    c = np.asarray(c_ref)
    positions = np.asarray(positions, dtype=np.int64)
    if len(X) < 2 or len(X) != len(c):
        raise InputError(f"the level model needs at least 2 reference rows with their protected values; got "
                         f"{fmt_count(len(X))} rows and {fmt_count(len(c))} values")
    level = torch.as_tensor(X[:, positions].argmax(axis=1), dtype=torch.long)
    A = np.asarray(admissible, dtype=bool).copy()
    A[positions] = False
    XA = X[:, A]
    a_mean = XA.mean(axis=0)
    a_scale = XA.std(axis=0)
    a_scale = np.where(a_scale > 0, a_scale, 1.0)
    K = len(positions)
    design = np.column_stack([np.ones(len(c)), (XA - a_mean) / a_scale])
    if kind == "continuous":
        c_mean, c_sd = float(np.mean(c)), float(np.std(c)) or 1.0
        z = ((c.astype(np.float64) - c_mean) / c_sd)[:, None]
        W = _fit_logit(torch.as_tensor(np.column_stack([design, z * design])), level, K, max_iter=max_iter)
        weights = np.stack([W[: design.shape[1]], W[design.shape[1]:]])
        return LevelModel(positions=positions, weights=weights, a_mean=a_mean, a_scale=a_scale, c_mean=c_mean,
                          c_sd=c_sd, kind=kind)
    c = c.astype(np.int64)
    weights = []
    for g in range(max(n_groups, 2)):
        rows = c == g
        if not rows.any():
            raise InputError(f"protected group {g} has no reference rows; the level model needs every group")
        weights.append(_fit_logit(torch.as_tensor(design[rows]), level[torch.as_tensor(rows)], K, max_iter=max_iter))
    return LevelModel(positions=positions, weights=np.stack(weights), a_mean=a_mean, a_scale=a_scale, c_mean=0.0,
                      c_sd=1.0, kind=kind)


def fit_level_models(X_ref, c_ref, groups: Sequence[np.ndarray], *, admissible, kind: str, n_groups: int = 2
                     ) -> tuple[LevelModel, ...]:
    """:func:`fit_level_model` for every one-hot group of ``groups`` none of whose features is held (admissible)."""
    A = np.asarray(admissible, dtype=bool)
    return tuple(fit_level_model(X_ref, c_ref, g, admissible=A, kind=kind, n_groups=n_groups)
                 for g in groups if len(g) > 1 and not A[np.asarray(g)].any())


def comonotone_transition(p_from: np.ndarray, p_to: np.ndarray, current: np.ndarray) -> np.ndarray:
    """P(counterfactual level = j | current level k): the comonotone coupling of two level distributions.

    The levels are ordered per row by their log-likelihood ratio log p_to − log p_from (ascending), and a
    person keeps their rank along that order.

    Parameters
    ----------
    p_from, p_to : ndarray of shape (b, K)
        Each row's level distribution in its own group and in the counterfactual group.
    current : ndarray of shape (b,), int64
        Each row's level.

    Returns
    -------
    ndarray of shape (b, K), float64, rows summing to 1
        The overlap of k's stretch [F_from(k⁻), F_from(k)] of the from-CDF with each level's stretch of the
        to-CDF, divided by k's probability (a level of probability 0 in the from-group keeps its rank at
        the point F_from(k)).
    """
    b, K = p_from.shape
    tiny = 1e-300
    order = np.argsort(np.log(np.maximum(p_to, tiny)) - np.log(np.maximum(p_from, tiny)), axis=1, kind="stable")
    rows = np.arange(b)
    rank_of = np.empty((b, K), dtype=np.int64)
    rank_of[rows[:, None], order] = np.arange(K)[None, :]
    pf, pt = np.take_along_axis(p_from, order, axis=1), np.take_along_axis(p_to, order, axis=1)
    cf, ct = np.cumsum(pf, axis=1), np.cumsum(pt, axis=1)
    cf[:, -1] = 1.0
    ct[:, -1] = 1.0
    pos = rank_of[rows, np.asarray(current, dtype=np.int64)]                  # (b,)
    hi = cf[rows, pos]
    lo = hi - pf[rows, pos]
    ct_lo = ct - pt
    overlap = np.clip(np.minimum(hi[:, None], ct) - np.maximum(lo[:, None], ct_lo), 0.0, None)   # (b, K)
    width = hi - lo
    point = width <= 1e-12
    if point.any():                                                           # a zero-probability level: its point
        u = hi[point][:, None]
        overlap[point] = ((ct_lo[point] <= u) & (u < ct[point])).astype(np.float64)
        overlap[point, -1] += (u[:, 0] >= 1.0)
    out = np.empty_like(overlap)
    out[rows[:, None], order] = overlap / overlap.sum(axis=1, keepdims=True)
    return out


#: Gauss–Legendre nodes of the one-dimensional integral in :func:`gumbel_transition`.
GUMBEL_NODES = 8


def comonotone_transition_t(p_from: torch.Tensor, p_to: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
    """:func:`comonotone_transition` in torch on the rows' device: (b, K), (b, K) float64, (b,) int64 -> (b, K).

    The same steps (a stable sort of the log-likelihood ratio, cumulative sums, the overlap of the stretches);
    a zero-probability level's point rule is taken for every row and kept where it applies (no branch on the
    host).
    """
    b, K = p_from.shape
    tiny = 1e-300
    order = torch.argsort(torch.log(p_to.clamp_min(tiny)) - torch.log(p_from.clamp_min(tiny)), dim=1, stable=True)
    rank_of = torch.empty_like(order).scatter_(1, order, torch.arange(K, device=order.device).expand(b, K))
    pf, pt = p_from.gather(1, order), p_to.gather(1, order)
    cf, ct = torch.cumsum(pf, dim=1), torch.cumsum(pt, dim=1)
    cf[:, -1] = 1.0
    ct[:, -1] = 1.0
    pos = rank_of.gather(1, current.long()[:, None])                          # (b, 1)
    hi = cf.gather(1, pos)
    lo = hi - pf.gather(1, pos)
    ct_lo = ct - pt
    overlap = (torch.minimum(hi, ct) - torch.maximum(lo, ct_lo)).clamp_min(0.0)   # (b, K)
    point = (hi - lo) <= 1e-12                                                 # (b, 1)
    at_point = ((ct_lo <= hi) & (hi < ct)).to(torch.float64)
    at_point[:, -1] += (hi[:, 0] >= 1.0).to(torch.float64)
    overlap = torch.where(point, at_point, overlap)
    return torch.empty_like(overlap).scatter_(1, order, overlap / overlap.sum(dim=1, keepdim=True))


_LEGGAUSS: dict = {}


def gumbel_transition_t(logits_from: torch.Tensor, logits_to: torch.Tensor, current: torch.Tensor, *,
                        nodes: int = GUMBEL_NODES) -> torch.Tensor:
    """:func:`gumbel_transition` in torch on the rows' device: (b, K), (b, K) float64, (b,) int64 -> (b, K).

    The same closed form and Gauss–Legendre nodes (numpy's, copied to the device once).
    """
    dev = logits_from.device
    key = (str(dev), nodes)
    if key not in _LEGGAUSS:
        _LEGGAUSS[key] = tuple(torch.as_tensor(a, dtype=torch.float64, device=dev)
                               for a in np.polynomial.legendre.leggauss(nodes))
    x, w = _LEGGAUSS[key]
    eta = logits_from.to(torch.float64)
    eta = eta - eta.max(dim=1, keepdim=True).values
    d = logits_to.to(torch.float64) - logits_from.to(torch.float64)
    k = current.long()[:, None]                                                # (b, 1)
    ek = torch.exp(eta)                                                        # (b, K)
    dk = d.gather(1, k)                                                        # (b, 1)
    ekk = ek.gather(1, k)                                                      # (b, 1)
    stay = ekk[:, 0] / (ek * torch.exp(-(dk - d).clamp_max(0.0))).sum(dim=1)
    delta = (d - dk).clamp_min(0.0)                                            # (b, K): Δ for each j
    s = (x[None, None, :] + 1.0) / 2.0 * delta[:, :, None]                     # (b, K_j, Q)
    es = torch.exp(-s)
    ee = torch.exp(-(d[:, :, None] - d[:, None, :]))                           # (b, K_j, K_i)
    A = torch.einsum("bjqi,bi->bjq", torch.maximum(es[..., None], ee[:, :, None, :]), ek)   # (b, K_j, Q)
    integral = (es / A ** 2 * w[None, None, :]).sum(dim=2) * delta / 2.0     # (b, K_j)
    joint = (ekk * ek * integral).scatter(1, k, stay[:, None])
    p_k = ekk / ek.sum(dim=1, keepdim=True)
    out = (joint / p_k).clamp_min(0.0)
    return out / out.sum(dim=1, keepdim=True)




def gumbel_transition(logits_from: np.ndarray, logits_to: np.ndarray, current: np.ndarray, *,
                      nodes: int = GUMBEL_NODES) -> np.ndarray:
    """P(counterfactual level = j | current level k) under the Gumbel-max coupling of two multinomial logits.

    The level model read as a structural model: level = argmax_i (η_i + g_i) with independent standard Gumbel
    noise g, and the counterfactual level argmax_i (η′_i + g_i) with the same noise (Oberst & Sontag 2019,
    "Counterfactual off-policy evaluation with Gumbel-max structural causal models", who sample the noise's
    posterior). Here the transition is computed, not sampled: with d = η′ − η and U_i = η_i + g_i,

    - staying: P(k, k) = e^{η_k} / Σ_i e^{η_i − min(0, d_k − d_i)};
    - moving to j ≠ k (possible only when Δ = d_j − d_k > 0):
      P(k, j) = e^{η_k + η_j} ∫₀^Δ e^{−s} / A(s)² ds with A(s) = Σ_i e^{η_i − min(s, d_j − d_i)}

    (integrating the max U_k = u + s and U_j = u over u in closed form; our derivation, checked against the
    sampled posterior in ``tests/method/test_counterfactual_moves.py``), then divided by p_k = softmax(η)_k. The
    integral is taken by Gauss–Legendre quadrature (``nodes`` points).

    Parameters
    ----------
    logits_from, logits_to : ndarray of shape (b, K)
        The level logits in the row's own group and in the counterfactual group.
    current : ndarray of shape (b,), int64
    nodes : int

    Returns
    -------
    ndarray of shape (b, K), rows summing to 1.
    """
    eta = np.asarray(logits_from, dtype=np.float64)
    eta = eta - eta.max(axis=1, keepdims=True)
    d = np.asarray(logits_to, dtype=np.float64) - np.asarray(logits_from, dtype=np.float64)
    rows = np.arange(eta.shape[0])
    k = np.asarray(current, dtype=np.int64)
    ek = np.exp(eta)                                                           # (b, K)
    dk = d[rows, k]                                                            # (b,)
    stay = ek[rows, k] / (ek * np.exp(-np.minimum(0.0, dk[:, None] - d))).sum(axis=1)
    delta = np.maximum(d - dk[:, None], 0.0)                                   # (b, K): Δ for each j
    x, w = np.polynomial.legendre.leggauss(nodes)
    s = (x[None, None, :] + 1.0) / 2.0 * delta[:, :, None]                     # (b, K_j, Q)
    es = np.exp(-s)
    ee = np.exp(-(d[:, :, None] - d[:, None, :]))                              # (b, K_j, K_i): e^{−(d_j − d_i)}
    # e^{−min(s, d_j − d_i)} = max(e^{−s}, e^{−(d_j − d_i)}): no exponential of the (b, K, Q, K) tensor
    A = np.einsum("bjqi,bi->bjq", np.maximum(es[..., None], ee[:, :, None, :]), ek)          # (b, K_j, Q)
    integral = (es / A ** 2 * w[None, None, :]).sum(axis=2) * delta / 2.0                   # (b, K_j)
    joint = ek[rows, k][:, None] * ek * integral
    joint[rows, k] = stay
    p_k = ek[rows, k] / ek.sum(axis=1)
    out = np.clip(joint / p_k[:, None], 0.0, None)
    return out / out.sum(axis=1, keepdims=True)


def gumbel_transition_sampled(logits_from: np.ndarray, logits_to: np.ndarray, current: np.ndarray, *,
                              draws: int = 4096, seed: int = 0) -> np.ndarray:
    """:func:`gumbel_transition` by sampling the noise's posterior (top-down, Oberst & Sontag 2019): the check of
    the closed form (tests), not used by the gate."""
    rng = np.random.default_rng(seed)
    b, K = logits_from.shape
    rows = np.arange(b)
    lse = np.logaddexp.reduce(logits_from, axis=1)
    peak = lse[:, None] + rng.gumbel(size=(b, draws))                         # the maximum, Gumbel(logsumexp η)
    others = logits_from[:, None, :] + rng.gumbel(size=(b, draws, K))
    truncated = -np.logaddexp(-peak[:, :, None], -others)                      # Gumbel(η_i) truncated below it
    truncated[rows, :, current] = peak
    level = (truncated + (logits_to - logits_from)[:, None, :]).argmax(axis=2)
    counts = np.bincount((rows[:, None] * K + level).ravel(), minlength=b * K).reshape(b, K)
    return counts / float(draws)


def configurations(x1: torch.Tensor, groups: Sequence[np.ndarray], probabilities: Sequence[Any], *,
                   max_configs: int = MAX_CONFIGURATIONS, min_probability: float = MIN_LEVEL_PROBABILITY
                   ) -> tuple[torch.Tensor, np.ndarray]:
    """Joint level configurations of several one-hot groups with their probabilities (independent groups).

    Parameters
    ----------
    x1 : Tensor of shape (b, d)
        The counterfactual inputs; each group's block is overwritten per configuration.
    groups : sequence of index arrays
        Encoded positions of each group in x1 (K_g each).
    probabilities : sequence of ndarray or Tensor of shape (b, K_g), all of one kind
        Each row's level probabilities per group.
    max_configs : int
        At most this many configurations per row (the most probable; the kept weights are renormalised).
    min_probability : float
        Levels less probable than this are not enumerated.

    Returns
    -------
    configs : Tensor of shape (b, C, d), float32
        C ≤ max_configs (padding configurations have weight 0).
    weights : ndarray of shape (b, C), float64, rows summing to 1
        A float64 Tensor on the probabilities' device when they are Tensors (the swap reading's device path).

    Notes
    -----
    The number of configurations C is read from the data: one scalar per group comes to the host (a shape).
    """
    b = x1.shape[0]
    on_device = bool(probabilities) and isinstance(probabilities[0], torch.Tensor)
    dev = probabilities[0].device if on_device else torch.device("cpu")
    weights = torch.ones((b, 1), dtype=torch.float64, device=dev)   # on the host when the probabilities are numpy
    chosen: list[torch.Tensor] = []
    for p in probabilities:
        p = p.to(torch.float64) if on_device else torch.as_tensor(np.asarray(p, dtype=np.float64))
        p = torch.where(p >= min_probability, p, torch.zeros_like(p))
        total = p.sum(dim=1, keepdim=True)
        p = torch.where(total > 0, p / total.clamp_min(1e-300), torch.full_like(p, 1.0 / p.shape[1]))
        C, K = weights.shape[1], p.shape[1]
        joint = (weights[:, :, None] * p[:, None, :]).reshape(b, C * K)
        keep = max(1, min(max_configs, int((joint > 0).sum(dim=1).max())))
        top_w, top_i = joint.topk(keep, dim=1)
        chosen = [torch.gather(ch, 1, top_i // K) for ch in chosen] + [top_i % K]
        weights = top_w
    weights = weights / weights.sum(dim=1, keepdim=True)
    C = weights.shape[1]
    configs = x1.float()[:, None, :].repeat(1, C, 1)
    for idx, level in zip(groups, chosen, strict=False):
        idx_t = torch.as_tensor(np.asarray(idx), dtype=torch.long, device=configs.device)
        block = torch.zeros((b, C, len(idx_t)), dtype=torch.float32, device=configs.device)
        block.scatter_(2, level[:, :, None].to(configs.device), 1.0)
        configs[:, :, idx_t] = block
    return configs, weights if on_device else weights.numpy()
