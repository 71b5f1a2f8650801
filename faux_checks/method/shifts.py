"""How a quantity is distributed in each group given the admissible features: per-group ridge fits and the
quantiles of their residuals (:class:`GroupShift`; a continuous c: per bin of c, :class:`ContinuousShift`).

The swap reading fits them on the aux log-odds (eq. 6, Δc: how far the aux output moves,
:func:`faux_checks.method.swap.fit_swap_reference`) and on each matched feature
(:class:`faux_checks.method.matching.FeatureMatching`); ``goal`` reads a person's rank in one group and
returns the value of that rank in the other, with numpy on the CPU and torch on a device.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from .quantiles import composite_knots, interp_t, interp_uniform, interp_uniform_t, quantile_ranks
from .torch_path import DeviceCached, t64

__all__ = ["continuous_shift", "ContinuousShift", "ContinuousStack", "CPU_TILE_ELEMENTS", "group_parts", "group_shift", "GroupShift",
           "MIN_BIN_ROWS", "N_BINS", "N_QUANTILES", "RANK_BUCKETS", "RankPairTables", "RIDGE", "ridge_fit"]


#: Quantiles kept per group and pair for the 1-D optimal transport (1,001: 0.1% resolution).
N_QUANTILES = 1001
#: Ridge of the per-group linear models of v on the admissible features (relative to the row count).
RIDGE = 1e-3


@dataclass(frozen=True)
class GroupShift(DeviceCached):
    """How the aux log-odds v = z_b − z_a differ between group a and group b, given the admissible features.

    Attributes
    ----------
    coef_from, coef_to : ndarray of shape (1 + d_A,)
        Intercept and slopes of the linear model of v on the admissible features, within group a
        (from) and within group b (to).
    quantiles_from, quantiles_to : ndarray of shape (N_QUANTILES,)
        Quantiles of the residuals of those models within each group.
    """

    coef_from: np.ndarray
    coef_to: np.ndarray
    quantiles_from: np.ndarray
    quantiles_to: np.ndarray

    def goal(self, v: np.ndarray, x_admissible: np.ndarray) -> np.ndarray:
        """The matched value of v in group b for rows of group a: (n,), (n, d_A) -> (n,).

        Float64 Tensors (on any device) in give a Tensor on that device (:meth:`goal_from_fits`).
        """
        if isinstance(v, torch.Tensor):
            coef_from, coef_to = (t64(c, v.device) for c in (self.coef_from, self.coef_to))
            return self.goal_from_fits(v, coef_from[0] + x_admissible @ coef_from[1:],
                                       coef_to[0] + x_admissible @ coef_to[1:])
        fitted_from = self.coef_from[0] + x_admissible @ self.coef_from[1:]
        fitted_to = self.coef_to[0] + x_admissible @ self.coef_to[1:]
        return self.goal_from_fits(v, fitted_from, fitted_to)

    def goal_from_fits(self, v: np.ndarray, fitted_from: np.ndarray, fitted_to: np.ndarray) -> np.ndarray:
        """:meth:`goal` given the two linear models' fitted values for the rows, (n,) each -> (n,).

        ndarrays in: numpy (np.interp). float64 Tensors in: the same on their device (:func:`~faux_checks.method.quantiles.interp_t`,
        :func:`~faux_checks.method.quantiles.interp_uniform_t`; the quantiles are copied to the device once and kept).
        """
        if isinstance(v, torch.Tensor):
            levels, ranks, q_to = self._on_device(v.device, "ranks", lambda: tuple(
                t64(a, v.device) for a in (*self._ranks, self.quantiles_to)))
            return fitted_to + interp_uniform_t(interp_t(v - fitted_from, levels, ranks), q_to)
        levels, ranks = self._ranks
        return fitted_to + interp_uniform(np.interp(v - fitted_from, levels, ranks), self.quantiles_to)

    @functools.cached_property
    def _ranks(self) -> tuple[np.ndarray, np.ndarray]:
        return quantile_ranks(self.quantiles_from)

    def composite(self) -> tuple[np.ndarray, np.ndarray]:
        """(knots, values): ``y ↦ goal_from_fits(y + h_from, h_from + coef_from[0], h_to + coef_to[0]) − h_to`` as one
        piecewise-linear function of y = v − h_from (:func:`~faux_checks.method.quantiles.composite_knots`; h the
        fits' slope parts): the intercepts are folded into its knots and values."""
        return composite_knots(self.quantiles_from, self.quantiles_to, float(self.coef_from[0]), float(self.coef_to[0]))


@dataclass(frozen=True)
class ContinuousShift(DeviceCached):
    """How the aux prediction v of a continuous c is distributed at each value of c, given the admissible features.

    The continuous analogue of :class:`GroupShift`: c's reference values are cut into bins; per bin, a
    linear model of v on the admissible features and the quantiles of its residuals. A person at c keeps
    their rank among people with the same c (and admissible features) when c moves to c ± 1 sd: the goal
    is the value of that rank at c ± 1 sd, so the move of v is the person's own, not one global slope
    (our reading).

    Attributes
    ----------
    centers : ndarray of shape (B,)
        Median c of each bin, increasing (in c's own units).
    coefs : ndarray of shape (B, 1 + d_A)
        Intercept and slopes of v on the admissible features within each bin.
    quantiles : ndarray of shape (B, N_QUANTILES)
        Residual quantiles within each bin.
    sd : float
        Standard deviation of c on the reference rows (the unit of a counterfactual move).
    slope : float
        Global change of v per +1 sd of c given the admissible features (extrapolation beyond the bins).
    """

    centers: np.ndarray
    coefs: np.ndarray
    quantiles: np.ndarray
    sd: float
    slope: float

    def _position(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For values c (n,): lower bin index, weight of the upper bin, and c beyond the outer centers (in sd)."""
        clipped = np.clip(c, self.centers[0], self.centers[-1])
        hi = np.clip(np.searchsorted(self.centers, clipped, side="right"), 1, len(self.centers) - 1)
        lo = hi - 1
        span = self.centers[hi] - self.centers[lo]
        w = np.where(span > 0, (clipped - self.centers[lo]) / np.where(span > 0, span, 1.0), 0.0)
        return lo, w, (c - clipped) / self.sd

    def _position_t(self, c: torch.Tensor, centers: torch.Tensor):
        """:meth:`_position` in torch (c float64 of any shape and the centers on one device)."""
        clipped = c.clamp(float(self.centers[0]), float(self.centers[-1]))
        hi = torch.searchsorted(centers, clipped.contiguous(), right=True).clamp_(1, len(self.centers) - 1)
        lo = hi - 1
        at_lo = centers.take(lo)
        span = centers.take(hi) - at_lo
        w = torch.where(span > 0, (clipped - at_lo) / span, 0.0)                # equal centers: the lower bin
        return lo, w, (c - clipped) / self.sd

    def _goal_t(self, v: torch.Tensor, c: torch.Tensor, x_admissible: torch.Tensor, sign: float) -> torch.Tensor:
        """:meth:`goal` in torch on v's device (no transfer): :class:`ContinuousStack` of this one shift."""
        stack = self._on_device(v.device, "stack", lambda: ContinuousStack([self], v.device))
        return stack.goal(v[:, None], c, x_admissible, sign)[:, 0]

    def goal(self, v: np.ndarray, c: np.ndarray, x_admissible: np.ndarray, sign: float) -> np.ndarray:
        """The matched value of v at c + sign·sd for rows at c: (n,), (n,), (n, d_A) -> (n,).

        float64 Tensors in (on any device): the same in torch on that device (:meth:`_goal_t`).
        """
        if isinstance(v, torch.Tensor):
            return self._goal_t(v, c, x_admissible, sign)
        grid = np.linspace(0.0, 1.0, self.quantiles.shape[1])
        design = np.column_stack([np.ones(len(v)), x_admissible])            # (n, 1 + d_A)
        fits = design @ self.coefs.T                                         # (n, B)
        rows = np.arange(len(v))
        lo, w, _ = self._position(c)
        fitted = (1 - w) * fits[rows, lo] + w * fits[rows, lo + 1]
        residual = v - fitted
        rank = np.zeros(len(v))
        for b in np.unique(np.concatenate([lo, lo + 1])):                    # mixture of the two bins' CDFs
            levels, ranks = quantile_ranks(self.quantiles[b])
            below, above = lo == b, lo + 1 == b
            rank[below] += (1 - w[below]) * np.interp(residual[below], levels, ranks)
            rank[above] += w[above] * np.interp(residual[above], levels, ranks)
        rank = np.clip(rank, 0.0, 1.0)
        lo_t, w_t, beyond = self._position(c + sign * self.sd)
        fitted_to = (1 - w_t) * fits[rows, lo_t] + w_t * fits[rows, lo_t + 1] + beyond * self.slope
        q_lo = np.empty(len(v))
        q_hi = np.empty(len(v))
        for b in np.unique(lo_t):
            sel = lo_t == b
            q_lo[sel] = np.interp(rank[sel], grid, self.quantiles[b])
            q_hi[sel] = np.interp(rank[sel], grid, self.quantiles[b + 1])
        return fitted_to + (1 - w_t) * q_lo + w_t * q_hi


#: Bins of a continuous c for :class:`ContinuousShift`: at most this many, and at least MIN_BIN_ROWS rows each.
N_BINS = 10
MIN_BIN_ROWS = 200


def ridge_fit(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    n = len(design)
    penalty = RIDGE * n * np.eye(design.shape[1])
    penalty[0, 0] = 0.0                                                  # no penalty on the intercept
    return np.linalg.solve(design.T @ design + penalty, design.T @ y)


def continuous_shift(v: np.ndarray, XA: np.ndarray, c: np.ndarray, slope: float, sd: float) -> ContinuousShift | None:
    n_bins = min(N_BINS, len(c) // MIN_BIN_ROWS)
    if n_bins < 2:
        return None
    edges = np.quantile(c, np.linspace(0.0, 1.0, n_bins + 1))
    which = np.clip(np.searchsorted(edges, c, side="right") - 1, 0, n_bins - 1)
    grid = np.linspace(0.0, 1.0, N_QUANTILES)
    centers, coefs, quantiles = [], [], []
    for b in range(n_bins):
        rows = which == b
        if rows.sum() < 2:
            return None
        design = np.column_stack([np.ones(int(rows.sum())), XA[rows]])
        coef = ridge_fit(design, v[rows])
        centers.append(float(np.median(c[rows])))
        coefs.append(coef)
        quantiles.append(np.quantile(v[rows] - design @ coef, grid))
    centers = np.asarray(centers)
    if not (np.diff(centers) > 0).all():
        return None
    return ContinuousShift(centers=centers, coefs=np.asarray(coefs), quantiles=np.asarray(quantiles), sd=sd, slope=slope)


def group_parts(Y: np.ndarray, XA: np.ndarray, c: np.ndarray, g: int, columns) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per column j of ``columns``: group g's ridge coefficients of ``Y[:, j]`` on the held features and its residual
    quantiles, as :func:`group_shift` computes them for g, bit for bit (the design and its Gram matrix formed once).

    Parameters
    ----------
    Y : ndarray of shape (n, d)
    XA : ndarray of shape (n, h)
        The held features.
    c : ndarray of shape (n,), int
        Group index per row.
    g : int
    columns : sequence of int
        Columns of ``Y``.

    Returns
    -------
    list of (coef (h + 1,), quantiles (N_QUANTILES,)), one per column.
    """
    grid = np.linspace(0.0, 1.0, N_QUANTILES)
    rows = c == g
    design = np.column_stack([np.ones(int(rows.sum())), XA[rows]])
    penalty = RIDGE * len(design) * np.eye(design.shape[1])
    penalty[0, 0] = 0.0
    gram = design.T @ design + penalty
    out = []
    for j in columns:
        y = Y[:, j][rows]
        coef = np.linalg.solve(gram, design.T @ y)
        out.append((coef, np.quantile(y - design @ coef, grid)))
    return out


def group_shift(y: np.ndarray, XA: np.ndarray, c: np.ndarray, a: int, b: int) -> GroupShift:
    """The per-group ridge regression of y on the held features and its residual quantiles, for groups a and b."""
    grid = np.linspace(0.0, 1.0, N_QUANTILES)
    parts = []
    for g in (a, b):
        rows = c == g
        design = np.column_stack([np.ones(int(rows.sum())), XA[rows]])
        coef = ridge_fit(design, y[rows])
        parts.append((coef, np.quantile(y[rows] - design @ coef, grid)))
    return GroupShift(parts[0][0], parts[1][0], parts[0][1], parts[1][1])


#: Buckets of each rank table's uniform search grid in :class:`RankPairTables` (a search starts in its bucket).
RANK_BUCKETS = 4096
#: Elements of a (shifts, targets, rows) block that :class:`ContinuousStack` reads at once on the CPU with one torch
#: thread: whole rows and few shifts, so that the tables it gathers from (about 1 MiB per shift) stay in the CPU's
#: cache; a device reads the whole block at once.
CPU_TILE_ELEMENTS = 2 ** 16
#: With several torch threads, the CPU's blocks are shared out among as many Python threads (torch releases the GIL
#: in its kernels) and hold at most this many elements where the rows allow: torch's grain, below which each op runs
#: on its calling thread alone (at::internal::GRAIN_SIZE).
SERIAL_ELEMENTS = 2 ** 15


@functools.lru_cache(maxsize=4)
def _pool(workers: int) -> ThreadPoolExecutor:
    """A pool of ``workers`` threads, one per torch thread, kept for the process."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="faux-continuous")


class RankPairTables:
    """The residual's rank in two neighbouring bins at once, for m :class:`ContinuousShift` that share their B bins.

    Table (f, p) (flat index f·(B − 1) + p) holds shift f's rank functions of bins p and p + 1 (np.interp on each
    bin's distinct residual quantiles and their mean ranks, :func:`~faux_checks.method.quantiles.quantile_ranks`)
    on the union of their knots: one search finds both values. Below a bin's first knot its rank is its first
    rank, at or above its last its last rank (np.interp); between the union's knots each is linear (the union
    refines both knot sets), so ``value + (y − knot) · slope`` is the bin's own interpolation up to a few ulp.

    Parameters
    ----------
    shifts : sequence of m ContinuousShift with the same B ≥ 2 bins
    device : torch.device

    Notes
    -----
    The search (as :class:`~faux_checks.method.quantiles.PiecewiseTables`): a uniform grid of
    :data:`RANK_BUCKETS` buckets over shift f's residual range (shared by its B − 1 tables, so the grid is
    broadcast per shift, not gathered per value) gives the first knot of each value's window, and ``steps`` fixed
    binary steps (known on the host) find the last knot ≤ the value. The two bins' values and slopes at a knot are
    adjacent (one cache line for the four gathers). A shift's tables are contiguous.
    """

    def __init__(self, shifts, device):
        m, B = len(shifts), len(shifts[0].centers)
        ranks = [[quantile_ranks(q) for q in s.quantiles] for s in shifts]        # [f][b] (levels, ranks)
        lo = np.array([min(r[0][0] for r in per) for per in ranks])              # (m,) each shift's residual range
        hi = np.array([max(r[0][-1] for r in per) for per in ranks])
        knots = [np.union1d(ranks[f][p][0], ranks[f][p + 1][0]) for f in range(m) for p in range(B - 1)]
        widths = (hi - lo) / RANK_BUCKETS
        margin = 1e-12 * (np.abs(lo) + np.abs(hi) + widths * RANK_BUCKETS) + 1e-300
        edges = lo[:, None] + widths[:, None] * np.arange(RANK_BUCKETS + 1)[None, :]          # (m, buckets + 1)
        of = np.arange(len(knots)) // (B - 1)                                    # each table's shift
        starts = np.stack([np.searchsorted(k, edges[f, :-1] - margin[f], side="right") for k, f in zip(knots, of, strict=True)])
        ends = np.stack([np.searchsorted(k, edges[f, 1:] + margin[f], side="right") + 1 for k, f in zip(knots, of, strict=True)])
        self.steps = int(np.ceil(np.log2(max(int((ends - starts).max()), 1))))
        n = np.array([len(k) for k in knots])
        width = int(n.max()) + 1 + 2 ** self.steps                           # col 0: below the first knot; +inf pad
        K = np.full((len(knots), width), np.inf)
        V = np.zeros((len(knots), width, 2))
        S = np.zeros((len(knots), width, 2))
        for t, k in enumerate(knots):
            f, p = divmod(t, B - 1)
            v = np.stack([np.interp(k, *ranks[f][p]), np.interp(k, *ranks[f][p + 1])], axis=1)   # (K_t, 2)
            K[t, 0], K[t, 1:n[t] + 1] = k[0], k
            V[t, 0], V[t, 1:n[t] + 1], V[t, n[t] + 1:] = v[0], v, v[-1]
            S[t, 1:n[t]] = np.diff(v, axis=0) / np.diff(k)[:, None]
        base = (np.arange(len(knots)) * width)[:, None]
        self.knots = torch.as_tensor(K.ravel(), dtype=torch.float64, device=device)
        self.ahead = [(2 ** i, self.knots[2 ** i:]) for i in reversed(range(self.steps))]   # knots[j + s] by offset
        packed = torch.as_tensor(np.stack([V[..., 0], V[..., 1], S[..., 0], S[..., 1]], axis=2).ravel(),
                                 dtype=torch.float64, device=device)          # per knot (v_p, v_p+1, s_p, s_p+1)
        self.packed = [packed[o:] for o in range(4)]
        index = torch.int32 if 4 * K.size < 2 ** 31 else torch.int64                # j and 4·j (the packed index)
        self.start = torch.as_tensor((starts + base).ravel(), dtype=index, device=device)
        self.lo = t64(lo, device)
        self.inv_width = t64(np.where(widths > 0, 1.0 / np.where(widths > 0, widths, 1.0), 0.0), device)

    def __call__(self, y: torch.Tensor, bucket_base: torch.Tensor, lo: torch.Tensor,
                 inv_width: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both bins' ranks at y (k, …) float64, contiguous: ``bucket_base`` (broadcastable to y, int32 or int64) the
        table per value times the buckets, (f·(B − 1) + p)·RANK_BUCKETS; ``lo``, ``inv_width`` (broadcastable to y) the
        value's shift's grid (:attr:`lo`, :attr:`inv_width`). Returns the rank in bin p and in bin p + 1, y's shape,
        float64 each."""
        flat = y.view(-1)
        bucket = (y - lo).mul_(inv_width).clamp_(0, RANK_BUCKETS - 1).to(bucket_base.dtype).add_(bucket_base)
        j = self.start.index_select(0, bucket.view(-1))                       # flat indices from here on
        for s, ahead in self.ahead:                                          # the last knot <= y in the window
            j.add_(ahead.index_select(0, j) <= flat, alpha=s)
        d = flat - self.knots.index_select(0, j)
        v_p, v_q, s_p, s_q = (part.index_select(0, j.mul_(4) if o == 0 else j) for o, part in enumerate(self.packed))
        return v_p.addcmul_(d, s_p).view(y.shape), v_q.addcmul_(d, s_q).view(y.shape)


class ContinuousStack:
    """m :class:`ContinuousShift` that share their bins (one per matched feature, or the aux output's one), read
    at once: per row one bin search for c and one for each target c ± sd; per (row, shift) one search for the rank
    in the two bins around c (:class:`RankPairTables`) and, for all targets at once, the two bins' quantiles and
    quantile steps at the rank (four gathers from one packed table). The bin-interpolated linear fits without held
    features are one small product per block: the shifts' intercepts (and slopes beyond the outer centers) times each
    row's two bin weights. O(1) torch ops in m and in the bins on a device; on the CPU the block is read in column
    blocks of :data:`CPU_TILE_ELEMENTS` (the same operations per block, the tables they read in cache).

    Raises
    ------
    ValueError
        The shifts' bin centers differ (they come from the same c, so they do not).
    """

    def __init__(self, shifts, device):
        first = shifts[0]
        if any(not np.array_equal(s.centers, first.centers) for s in shifts):
            raise ValueError("ContinuousStack needs shifts with the same bins")
        self.first, self.device = first, device
        m, B, Q = len(shifts), len(first.centers), first.quantiles.shape[1]
        self.m, self.n_bins, self.n_q = m, B, Q
        self.ranks = RankPairTables(shifts, device)
        coefs = np.stack([s.coefs for s in shifts])                                 # (m, B, 1 + d_A)
        self.intercepts = t64(coefs[:, :, 0], device)                               # (m, B)
        self.flat_intercepts = (self.intercepts.view(-1), self.intercepts.view(-1)[1:])   # at f·B + b, f·B + b + 1
        slopes = np.array([s.slope for s in shifts])
        self.bin_coefs = t64(np.concatenate([coefs[:, :, 0], slopes[:, None]], axis=1), device)   # (m, B + 1)
        self.offsets: dict = {}                                                      # signs -> (1 + S, 1) c moves
        self.weights = t64(coefs[:, :, 1:].reshape(m * B, -1), device)               # (m·B, d_A): row f·B + b
        q = np.stack([s.quantiles for s in shifts])                                 # (m, B, Q)
        q_i, dq_i = q[:, :, :-1], np.diff(q, axis=2)                                 # (m, B, Q − 1) each
        nxt = lambda a: np.concatenate([a[:, 1:], np.zeros_like(a[:, :1])], axis=1)  # noqa: E731  bin b + 1
        packed = t64(np.stack([q_i, dq_i, nxt(q_i), nxt(dq_i)], axis=3).ravel(), device)   # at 4·((f·B + b)·(Q − 1) + i)
        self.quantiles = [packed[o:] for o in range(4)]                              # q, dq of bin b and of bin b + 1
        self.slope = t64(slopes, device)[:, None]                                    # (m, 1)
        self.centers = t64(first.centers, device)

    def goal(self, v: torch.Tensor, c: torch.Tensor, x_admissible: torch.Tensor | None, sign: float) -> torch.Tensor:
        """:meth:`ContinuousShift.goal` of every column: v (b, m) float64, c (b,), x_admissible (b, d_A) float64 or
        None -> (b, m) float64 on v's device."""
        return self.goals(v, c, x_admissible, (sign,))[0]

    def goals(self, v: torch.Tensor, c: torch.Tensor, x_admissible: torch.Tensor | None, signs) -> list[torch.Tensor]:
        """:meth:`goal` at each sign of ``signs`` (the rank at c is read once, the signs' moves in one block): a list
        of (b, m) float64 (views of an (m, S, b) block: the move reads each shift's values contiguously)."""
        first, S, B, Q, b = self.first, len(signs), self.n_bins, self.n_q, len(c)
        fits = None
        if x_admissible is not None and x_admissible.shape[1]:
            fits = (self.weights @ x_admissible.T).view(self.m, B, -1).add_(self.intercepts[:, :, None])
        if tuple(signs) not in self.offsets:      # c's moves, 1 at the targets, the bins' index scales: (1 + S, 1) each
            self.offsets[tuple(signs)] = (*(t64([[0.0], *([x] for x in xs)], self.device)
                                            for xs in ([sign * first.sd for sign in signs], [1.0] * S)),
                                          torch.tensor([[RANK_BUCKETS]] + [[4 * (Q - 1)]] * S, dtype=torch.int32,
                                                       device=self.device))
        offsets, targets, scales = self.offsets[tuple(signs)]
        lo, w, beyond = first._position_t(torch.add(c, offsets).view(1, -1), self.centers)   # (1, (1 + S)·b): c, c ± sd
        hat = None
        if fits is None:                                   # (B + 1, (1 + S)·b): the two bins' weights, the move beyond
            hat = torch.zeros((B + 1, (1 + S) * b), dtype=torch.float64, device=c.device)
            hat.scatter_(0, lo, torch.sub(1.0, w)).scatter_(0, lo + 1, w)
            torch.mul(beyond.view(1 + S, b), targets, out=hat[B].view(1 + S, b))
        here, there = lo.int().view(1 + S, b).mul_(scales).split([1, S])             # (1, b), (S, b)
        where = dict(lo=lo, w=w.view(1 + S, b).split([1, S]), beyond=beyond, hat=hat, here=here, there=there)
        vt = v.T.contiguous().unsqueeze(1)                                           # (m, 1, b)
        workers = torch.get_num_threads() if v.device.type == "cpu" else 1
        k = self.m if v.device.type != "cpu" else max(1, (CPU_TILE_ELEMENTS if workers == 1 else SERIAL_ELEMENTS)
                                                           // max(1, S * b))
        out = torch.empty((self.m, S, b), dtype=vt.dtype, device=vt.device)
        if k >= self.m:
            self._block(vt, self._columns(slice(0, self.m)), fits, where, out)
            return list(out.permute(1, 2, 0).unbind(0))
        blocks = [slice(start, min(start + k, self.m)) for start in range(0, self.m, k)]

        def run(part: list[slice]) -> None:
            for cols in part:
                self._block(vt[cols], self._columns(cols), fits, where, out[cols])

        if workers == 1 or len(blocks) == 1:
            run(blocks)
        else:
            list(_pool(workers).map(run, [blocks[i::workers] for i in range(workers)]))
        return list(out.permute(1, 2, 0).unbind(0))

    def _columns(self, cols: slice) -> dict:
        """Per-shift constants of the shifts ``cols`` as (k, 1, 1) columns (kept per block)."""
        cache = self.__dict__.setdefault("_blocks", {})
        if (cols.start, cols.stop) not in cache:
            B, Q = self.n_bins, self.n_q
            f = torch.arange(cols.start, cols.stop, device=self.device, dtype=torch.int32)[:, None, None]
            cache[cols.start, cols.stop] = dict(
                cols=cols, fits=f.long() * B, rank=f * ((B - 1) * RANK_BUCKETS), quantile=f * (4 * B * (Q - 1)),
                lo=self.ranks.lo[cols, None, None], inv_width=self.ranks.inv_width[cols, None, None],
                slope=self.slope[cols, :, None], coefs=self.bin_coefs[cols])
        return cache[cols.start, cols.stop]

    def _fitted(self, fits: torch.Tensor, block: dict, lo: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """The bin-interpolated linear fit per (shift of the block, position, row): fits (m, B, b), lo (P, b) the lower
        bin at P positions, w (P, b) the upper bin's weight -> (k, P, b)."""
        b = fits.shape[2]
        at = (block["fits"] + lo).mul_(b).add_(torch.arange(b, device=lo.device))      # (f·B + lower bin)·b + row
        flat = fits.view(-1)
        return torch.lerp(flat.index_select(0, at.view(-1)).view(at.shape),
                          flat[b:].index_select(0, at.view(-1)).view(at.shape), w)

    def _block(self, v, block: dict, fits, where: dict, out: torch.Tensor) -> None:
        """The goals of a block of shifts (v (k, 1, b)) at the S moves into ``out`` (k, S, b). ``where``: the bins
        (``lo`` (1, (1 + S)·b) int64; ``here`` (1, b) times the rank tables' buckets, ``there`` (S, b) times 4·(Q − 1)) and
        upper weights (``w``: (1, b), (S, b)) around c and each target, ``beyond`` (1, (1 + S)·b) c and each target
        beyond the outer centers (in sd), ``hat`` (B + 1, (1 + S)·b) the bins' weights and the targets' moves beyond
        (no held features) or None."""
        Q, S, b = self.n_q, where["there"].shape[0], v.shape[2]
        w_here, w_t = where["w"]
        if where["hat"] is None:
            lo = where["lo"].view(1 + S, b)
            fitted = self._fitted(fits, block, lo[:1], w_here)
            fitted_t = self._fitted(fits, block, lo[1:], w_t).addcmul_(where["beyond"].view(1 + S, b)[1:],
                                                                       block["slope"])
        else:
            both = torch.mm(block["coefs"], where["hat"]).view(-1, 1 + S, b)         # (k, 1 + S, b)
            fitted, fitted_t = both.narrow(1, 0, 1), both.narrow(1, 1, S)
        rank_p, rank_q = self.ranks(v - fitted, where["here"] + block["rank"], block["lo"], block["inv_width"])
        pos = torch.lerp(rank_p, rank_q, w_here).clamp_(0.0, 1.0).mul_(Q - 1)          # (k, 1, b)
        i = pos.int().clamp_(0, Q - 2)
        frac = pos.sub_(i)
        at = torch.add(where["there"], block["quantile"]).add_(i, alpha=4)             # (k, S, b): each shift's pair
        flat = at.view(-1)
        q_p, dq_p, q_q, dq_q = (part.index_select(0, flat).view(at.shape) for part in self.quantiles)
        q = torch.lerp(q_p.addcmul_(frac, dq_p), q_q.addcmul_(frac, dq_q), w_t)
        torch.add(fitted_t, q, out=out)
