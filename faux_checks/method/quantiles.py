"""1-D optimal transport by quantiles: np.interp on quantile grids, and the same in torch (np.interp semantics).

The numpy helpers are the CPU path of the swap reading's matched quantiles (the pinned scores); the ``*_t``
helpers are their torch counterparts for a chunk on a device (tests/method/test_swap_torch_path.py holds them equal).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
import torch

__all__ = ["BucketTables", "interp_t", "interp_uniform", "interp_uniform_t", "matched_quantile", "quantile_ranks",
           "round_up_float32"]


def matched_quantile(values: np.ndarray, q_from: np.ndarray, q_to: np.ndarray) -> np.ndarray:
    """1-D optimal transport between two distributions given by their quantiles.

    Parameters
    ----------
    values : ndarray of shape (n,)
    q_from, q_to : ndarray of shape (Q,), non-decreasing
        Quantiles of the source and target distributions on the same probability grid.

    Returns
    -------
    ndarray of shape (n,)
        The target distribution's value at each value's rank in the source distribution (ties
        and flat stretches at their mid-rank; values outside the source range at its ends).
    """
    levels, ranks = quantile_ranks(q_from)
    return np.interp(np.interp(values, levels, ranks), np.linspace(0.0, 1.0, len(q_from)), q_to)


def interp_uniform(r: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.interp(r, linspace(0, 1, len(q)), q)`` for r in [0, 1], by index arithmetic (no search)."""
    pos: np.ndarray = r * (len(q) - 1)
    i = np.minimum(pos.astype(np.int64), len(q) - 2)
    return q[i] + (pos - i) * (q[i + 1] - q[i])


def quantile_ranks(q_from: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct quantile values and their mean rank on the probability grid (ties share their mean rank)."""
    grid = np.linspace(0.0, 1.0, len(q_from))
    levels, inverse = np.unique(q_from, return_inverse=True)
    return levels, np.bincount(inverse, weights=grid) / np.bincount(inverse)


def interp_t(x: torch.Tensor, xp: torch.Tensor, fp: torch.Tensor) -> torch.Tensor:
    """``np.interp(x, xp, fp)`` in torch, on x's device.

    Parameters
    ----------
    x : Tensor of shape (n,), float64
    xp : Tensor of shape (Q,), float64, strictly increasing
    fp : Tensor of shape (Q,), float64, on x's device

    Returns
    -------
    Tensor of shape (n,), float64
        Linear interpolation; ``fp[0]`` below ``xp[0]``, ``fp[-1]`` at or above ``xp[-1]``, ``fp[j]`` where
        x equals ``xp[j]``, NaN where x is NaN (one point, Q = 1: ``fp[0]`` everywhere, NaN included).

    Notes
    -----
    Our reading: np.interp semantics (numpy's ``arr_interp``: the same slope formula ``slope·(x − xp[j]) +
    fp[j]``, and its retry from the right end of the interval where that is NaN), so that on float64 CPU
    tensors it equals np.interp (tests/method/test_swap_torch_path.py).
    """
    if xp.shape[0] == 1:
        return torch.full_like(x, 0.0) + fp[0]
    j = (torch.searchsorted(xp, x.contiguous(), right=True) - 1).clamp(0, xp.shape[0] - 2)   # xp[j] <= x < xp[j+1]
    x0, x1, f0, f1 = xp[j], xp[j + 1], fp[j], fp[j + 1]
    slope = (f1 - f0) / (x1 - x0)
    out = slope * (x - x0) + f0
    retry = torch.isnan(out)
    out = torch.where(retry, slope * (x - x1) + f1, out)
    out = torch.where(torch.isnan(out) & (f0 == f1), f0, out)
    out = torch.where(x == x0, f0, out)
    out = torch.where(x >= xp[-1], fp[-1], out)
    out = torch.where(x < xp[0], fp[0], out)
    return torch.where(torch.isnan(x), x, out)


def interp_uniform_t(r: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """:func:`interp_uniform` in torch: ``np.interp(r, linspace(0, 1, len(q)), q)`` for r (n,) in [0, 1], q (Q,) float64.

    The index is clamped to [0, Q − 2] (numpy's would be out of range for a NaN r; here a NaN r gives NaN).
    """
    pos = r * (q.shape[0] - 1)
    i = pos.long().clamp(0, q.shape[0] - 2)
    return q[i] + (pos - i) * (q[i + 1] - q[i])


#: Buckets of the uniform index over each table's range in :class:`PiecewiseTables` (the search starts in a bucket).
N_BUCKETS = 2048


def composite_knots(q_from: np.ndarray, q_to: np.ndarray, shift_from: float = 0.0,
                    shift_to: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The matched-quantile map ``y ↦ shift_to + matched_quantile(y − shift_from, q_from, q_to)`` as one
    piecewise-linear function: (knots (K,), values (K,)), knots strictly increasing, K ≤ 2 Q.

    The map is ``np.interp`` on the distinct quantiles (ranks with ties at their mean rank,
    :func:`quantile_ranks`) followed by ``np.interp`` on the uniform probability grid; both are linear between
    the distinct quantiles and the points whose rank is a grid point, so those points are its knots, and
    ``np.interp(y, knots, values)`` is the map (values at the knots by the two steps; below the first and above
    the last knot it is constant, as np.interp is). Rounding: the composite and the two steps differ by a few ulp.
    """
    levels, ranks = quantile_ranks(q_from)
    grid = np.linspace(0.0, 1.0, len(q_from))
    inner = grid[(grid >= ranks[0]) & (grid <= ranks[-1])]
    knots = np.unique(np.concatenate([levels, np.interp(inner, ranks, levels)]) + shift_from)
    values = shift_to + interp_uniform(np.interp(knots - shift_from, levels, ranks), q_to)
    return knots, values


class PiecewiseTables:
    """T piecewise-linear functions (np.interp semantics) evaluated at once on a block of values, each value
    reading the table its id names: one search and one interpolation for the whole block, on any device.

    Parameters
    ----------
    knots, values : sequence of T ndarrays of shape (K_t,)
        Each table's knots (strictly increasing, K_t ≥ 1) and its values there.
    ranges : ndarray of shape (T, 2)
        A range per table that holds its knots (tables that share a range share their bucket grid, so that a
        caller can pass the grid's ``lo``, ``inv_width`` broadcast instead of gathering them per value).
    device : torch.device

    Notes
    -----
    The search: a uniform grid of :data:`N_BUCKETS` buckets over each table's range gives every value the first
    knot of its bucket's window (the knots within the bucket, widened by a rounding margin), and a branchless
    binary search of ``steps`` = ⌈log₂ window⌉ fixed steps finds the last knot ≤ the value (``steps`` is known on
    the host, so nothing is read back from the device). Between the knots found and the next the value is
    ``values[j] + (y − knots[j]) · slopes[j]``; below the first knot ``values[0]``, at or above the last
    ``values[-1]`` (np.interp). Non-finite values are not supported (the chunk's rows are checked finite).
    """

    def __init__(self, knots, values, ranges: np.ndarray, device):
        n = np.array([len(k) for k in knots])
        widths = (ranges[:, 1] - ranges[:, 0]) / N_BUCKETS
        margin = 1e-12 * (np.abs(ranges).sum(axis=1) + widths * N_BUCKETS) + 1e-300
        edges = ranges[:, :1] + widths[:, None] * np.arange(N_BUCKETS + 1)[None, :]
        per = list(zip(knots, edges, margin, strict=True))
        starts = np.stack([np.searchsorted(k, e[:-1] - m, side="right") for k, e, m in per])
        ends = np.stack([np.searchsorted(k, e[1:] + m, side="right") + 1 for k, e, m in per])
        self.steps = int(np.ceil(np.log2(max(int((ends - starts).max()), 1))))
        width = int(n.max()) + 1 + 2 ** self.steps                           # col 0: below the first knot; +inf pad
        K = np.full((len(knots), width), np.inf)
        V = np.zeros((len(knots), width))
        S = np.zeros((len(knots), width))
        for t, (k, v) in enumerate(zip(knots, values, strict=True)):
            K[t, 0], K[t, 1:n[t] + 1] = k[0], k
            V[t, 0], V[t, 1:n[t] + 1], V[t, n[t] + 1:] = v[0], v, v[-1]
            S[t, 1:n[t]] = np.diff(v) / np.diff(k)
        base = (np.arange(len(knots)) * width)[:, None]
        f64 = dict(dtype=torch.float64, device=device)
        self.knots, self.values, self.slopes = (torch.as_tensor(a.ravel(), **f64) for a in (K, V, S))
        self.start = torch.as_tensor((starts + base).ravel(), dtype=torch.int64, device=device)
        self.lo = torch.as_tensor(ranges[:, 0], **f64)
        self.inv_width = torch.as_tensor(np.where(widths > 0, 1.0 / np.where(widths > 0, widths, 1.0), 0.0), **f64)

    def __call__(self, y: torch.Tensor, tid: torch.Tensor, lo: torch.Tensor | None = None,
                 inv_width: torch.Tensor | None = None) -> torch.Tensor:
        """Each table's function at y: y float64 of any shape, tid (int64, broadcastable to y) the table per value;
        ``lo``, ``inv_width`` the bucket grid broadcastable to y (default: gathered by tid). Returns y's shape."""
        lo = _take(self.lo, tid) if lo is None else lo
        inv_width = _take(self.inv_width, tid) if inv_width is None else inv_width
        flat = y.reshape(-1)
        bucket = ((y - lo) * inv_width).clamp_(0, N_BUCKETS - 1).long().add_(tid * N_BUCKETS).view(-1)
        j = self.start.index_select(0, bucket)                               # flat indices from here on
        for s in (2 ** i for i in reversed(range(self.steps))):              # the last knot <= y in the window
            j.add_(self.knots.index_select(0, j + s) <= flat, alpha=s)
        out = self.values.index_select(0, j).addcmul_(flat - self.knots.index_select(0, j), self.slopes.index_select(0, j))
        return out.view(y.shape)


def _take(flat: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``flat.take(index)`` for a contiguous index (index_select: about 3x faster than take on the CPU)."""
    return flat.index_select(0, index.reshape(-1)).view(index.shape)


#: Bucket counts :class:`BucketTables` tries per column's grid, smallest first: each column takes the smallest that
#: needs no more search steps than the finest (the steps: ⌈log₂(1 + most knots in a bucket)⌉ on the finest grid).
BUCKET_COUNTS = (2048, 4096, 8192, 16384, 32768, 65536)

#: Values a CPU reading of :class:`BucketTables` takes per block (whole columns of the (k, F, b) block; its buffers,
#: about 60 bytes a value for binary c and 42 for 3-class c, are reused from chunk to chunk): a (16,384, 100) chunk
#: in one block for binary c, two for 3-class c (few, large operations: each is one parallel region of torch's
#: threads).
BLOCK_VALUES = 1 << 21


def round_up_float32(a: np.ndarray) -> np.ndarray:
    """Each value as the smallest float32 at or above it (+inf above float32's range).

    For a float32 y and any float64 k: ``k <= y`` exactly when ``round_up_float32(k) <= y``.
    """
    with np.errstate(over="ignore"):
        f = np.asarray(a, dtype=np.float64).astype(np.float32)
    low = f.astype(np.float64) < a
    f[low] = np.nextafter(f[low], np.float32(np.inf))
    return f


class _Search(NamedTuple):
    """:class:`BucketTables`' search for values of one dtype, on its device (:meth:`BucketTables._searcher`)."""

    steps: int                   # fixed search steps after the bucket lookup
    lo: torch.Tensor             # (F, 1) each column's grid: its low end, buckets per unit and last bucket
    inv: torch.Tensor
    last: torch.Tensor
    first: torch.Tensor          # (F, 1) int32: each column's first bucket in a searched pair's block
    per_pair: int                # buckets per searched pair
    start: torch.Tensor          # int32: each bucket's start col in the flat tables
    keys: torch.Tensor           # the knots as searched (float32: rounded up)
    block: torch.Tensor          # (P,) int32: each pair's searched pair's block
    shift: torch.Tensor | None   # (P,) int32: each pair's tables' offset from its searched pair's (None: all 0)


class BucketTables:
    """P·F piecewise-linear functions (np.interp semantics) read by a block y (b, F): column f of a row of pair p
    reads table p·F + f. One bucket lookup, a fixed search of (mostly) one step and one interpolation for the block.

    Parameters
    ----------
    knots, values : sequence of P·F ndarrays of shape (K_t,)
        Table p·F + f's knots (strictly increasing, K_t ≥ 1) and its values there.
    ranges : ndarray of shape (F, 2)
        Per column, a range (lo, hi) that holds the knots of its P tables: a uniform bucket grid over it.
    device : torch.device

    Notes
    -----
    Exact: the same knot as a binary search over each table is found, and the value is PiecewiseTables'
    ``values[j] + (y − knots[j]) · slopes[j]`` (one ``addcmul``), bit for bit. The bucket of a value,
    ``int(clamp((y − lo) · inv_width, 0, B − 1))``, is computed by the same torch operations, in y's dtype, for the
    knots when the tables are built, so it is non-decreasing in y: the last knot ≤ y is the last knot of an earlier
    bucket (the bucket's start) or one of the bucket's own knots, found by ⌈log₂(1 + most knots in a bucket)⌉ fixed
    steps. A float32 y is searched among the knots rounded up to float32 (:func:`round_up_float32`: the same
    comparisons), so it needs no float64 copy for the search. Each column's bucket count: the smallest of
    :data:`BUCKET_COUNTS` that needs no more search steps than the finest. The block is read column by column
    (transposed), so that each column's few tables stay in cache. Pairs whose tables have the same knots in every
    column (:attr:`search_pair`; the matched move's pairs out of one group: their knots are that group's quantiles)
    share one bucket grid and start table, and a block whose rows read k pairs out of their own group each is
    searched once.
    Non-finite values are not supported (the chunk's rows are checked finite).

    Attributes
    ----------
    search_pair : ndarray of shape (P,), int64
        Each pair's first pair with the same knots in every column (itself where none comes earlier).
    """

    def __init__(self, knots, values, ranges: np.ndarray, device):
        n = np.array([len(k) for k in knots])
        self.n_cols = len(ranges)
        self.n_tables = len(knots)
        self.device = device
        self._ranges = np.asarray(ranges, dtype=np.float64)
        self._knots = [np.asarray(k, dtype=np.float64) for k in knots]
        self._search: dict = {}
        F, P = self.n_cols, self.n_tables // self.n_cols
        self.search_pair = self._search_pairs(P)
        self._searched = np.unique(self.search_pair)                            # the pairs whose knots are searched
        searched = (self._searched[:, None] * F + np.arange(F)).ravel()         # their tables
        flat = np.concatenate([self._knots[t] for t in searched])                # the searched tables' knots in order
        table: np.ndarray = np.repeat(np.arange(len(searched)), n[searched])     # each knot's table among them
        grids = {dt: self._grid(dt, round_up_float32(flat) if dt == torch.float32 else flat, table)
                 for dt in (torch.float32, torch.float64)}
        self.width = int(n.max()) + 1 + 2 ** max(g[2] for g in grids.values())   # col 0: below the first knot; +inf pad
        K = np.full((self.n_tables, self.width), np.inf)
        V = np.zeros((self.n_tables, self.width))
        S = np.zeros((self.n_tables, self.width))
        for t, (k, v) in enumerate(zip(knots, values, strict=True)):
            K[t, 0], K[t, 1:n[t] + 1] = k[0], k
            V[t, 0], V[t, 1:n[t] + 1], V[t, n[t] + 1:] = v[0], v, v[-1]
            S[t, 1:n[t]] = np.diff(v) / np.diff(k)
        self._K = K
        with np.errstate(over="ignore", invalid="ignore"):                     # the largest |value| any finite float32 reads
            most = np.abs(V).max() + (float(np.finfo(np.float32).max) + max(np.abs(k).max() for k in self._knots)) * np.abs(S).max()
        #: Every finite float32 y reads finite values whose sum over the F columns is finite (tables of moderate values).
        self.finite_float32 = bool(np.isfinite(most) and most * self.n_cols < 1e300)
        f64 = dict(dtype=torch.float64, device=device)
        self.knots, self.values, self.slopes = (torch.as_tensor(a.ravel(), **f64) for a in (K, V, S))
        self._grids = grids

    def _bucket_grid(self, dtype, nb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo, inv_width, last bucket), each (F, 1), of nb (F,) buckets per column, in dtype's numpy type.

        A span so narrow that nb / span overflows dtype gets dtype's largest finite inv_width (an infinite one would
        read 0 · inf = NaN at the range's low end); its knots then share fewer buckets and take more search steps."""
        lo, hi = self._ranges[:, 0], self._ranges[:, 1]
        span = hi - lo
        np_type = np.float32 if dtype == torch.float32 else np.float64
        with np.errstate(over="ignore"):
            inv = np.minimum(np.where(span > 0, nb / np.where(span > 0, span, 1.0), 0.0), np.finfo(np_type).max)
        return lo.astype(np_type)[:, None], inv.astype(np_type)[:, None], (nb - 1).astype(np_type)[:, None]

    def _buckets(self, dtype, nb: np.ndarray, y: np.ndarray, column: np.ndarray) -> np.ndarray:
        """The bucket (int32; non-decreasing within each table) of every knot y (the tables' knots concatenated, in
        dtype: float32 rounded up; ``column`` each knot's column f, table p·F + f) in its column's grid of nb[f]
        buckets.

        numpy's operations of :meth:`__call__`'s bucket formula, in the same dtype: IEEE subtraction, multiplication,
        clamp and truncation round alike in numpy and in torch on every device.
        """
        lo, inv, last = (g[column, 0] for g in self._bucket_grid(dtype, nb))
        return np.minimum(np.maximum((y - lo) * inv, 0), last).astype(np.int32)

    def _grid(self, dtype, y: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], int]:
        """(bucket count per column (F,), knots per bucket of each table, search steps) for values in dtype, from
        every table's knots y (concatenated, in dtype: float32 rounded up) and each knot's table.

        The steps: those the finest grid of :data:`BUCKET_COUNTS` needs (⌈log₂(1 + most knots in a bucket)⌉); each
        column's bucket count: the smallest that needs no more (finer grids cost memory and cache). A table's buckets
        are non-decreasing in its knots, so the most knots in one bucket is its longest run of one bucket.
        """
        starts = np.flatnonzero(np.diff(table, prepend=-1))                 # each table's first knot (K_t ≥ 1)
        column: np.ndarray = table % self.n_cols
        most = {}                                                            # nb -> (F,) most knots in a bucket
        for count in BUCKET_COUNTS:
            # buckets lie in [0, count): keys table·(count + 1) + bucket differ between tables, so no run spans two
            key = table.astype(np.int64) * (count + 1) + self._buckets(dtype, np.full(self.n_cols, count), y, column)
            change = np.flatnonzero(np.diff(key, prepend=-1, append=-1))     # where each run of one key starts; N
            runs = np.diff(change)                                           # knots per run, runs in table order
            first_run = np.searchsorted(change[:-1], starts)                # each table's first run (a knot index
            per_table = np.maximum.reduceat(runs, first_run)                # is not a run index)
            most[count] = per_table.reshape(-1, self.n_cols).max(axis=0)
        steps = int(np.ceil(np.log2(most[BUCKET_COUNTS[-1]].max() + 1)))
        fits = np.stack([most[count] <= 2 ** steps - 1 for count in BUCKET_COUNTS])          # (levels, F)
        nb = np.asarray(BUCKET_COUNTS)[fits.argmax(axis=0)]
        per = nb[np.arange(len(starts)) % self.n_cols]                       # each table's buckets
        offset = np.concatenate([[0], np.cumsum(per)[:-1]])
        flat = np.bincount(offset[table] + self._buckets(dtype, nb, y, column), minlength=int(per.sum()))
        counts = np.split(flat, offset[1:])
        return nb, counts, steps

    def _search_pairs(self, P: int) -> np.ndarray:
        """(P,) int64: each pair's first pair with the same knots in every column (bytes equal, lengths equal)."""
        first: dict = {}
        out: np.ndarray = np.empty(P, dtype=np.int64)
        for p in range(P):
            tables = self._knots[p * self.n_cols:(p + 1) * self.n_cols]
            key = (np.array([len(k) for k in tables]).tobytes(), np.concatenate(tables).tobytes())
            out[p] = first.setdefault(key, p)
        return out

    def _searcher(self, dtype) -> _Search:
        """The search for values in dtype, built once per dtype (:class:`_Search`).

        Buckets are laid out searched pair by searched pair, column by column (column f of the s-th searched pair
        from s·Σnb + Σ_{f' < f} nb[f']); a bucket's start col indexes the searched pair's own tables."""
        if dtype not in self._search:
            nb, counts, steps = self._grids[dtype]
            F = self.n_cols
            tables = (self._searched[:, None] * F + np.arange(F)).ravel()
            start = np.concatenate([np.concatenate([[0], np.cumsum(c)[:-1]]) + t * self.width
                                    for t, c in zip(tables, counts, strict=True)])
            keys = round_up_float32(self._K.ravel()) if dtype == torch.float32 else self._K.ravel()
            first = np.concatenate([[0], np.cumsum(nb)[:-1]]).astype(np.int32)[:, None]
            on = lambda a: torch.as_tensor(a, device=self.device)             # noqa: E731
            lo, inv, last = (on(g) for g in self._bucket_grid(dtype, nb))
            block: np.ndarray = np.searchsorted(self._searched, self.search_pair).astype(np.int32)
            shift = ((np.arange(len(self.search_pair)) - self.search_pair) * F * self.width).astype(np.int32)
            self._search[dtype] = _Search(steps, lo, inv, last, on(first), int(nb.sum()), on(start.astype(np.int32)),
                                          on(keys), on(block), on(shift) if shift.any() else None)
        return self._search[dtype]

    def search_steps(self, dtype) -> int:
        """The fixed search steps after the bucket lookup for values in dtype (torch.float32 or torch.float64):
        ⌈log₂(1 + most knots of a table in one bucket)⌉, 1 unless knots lie closer than the finest grid's bucket."""
        return self._grids[dtype][2]

    def __call__(self, y: torch.Tensor, pair: torch.Tensor, one_search: bool | None = None) -> torch.Tensor:
        """The tables at y (b, F), float32 or float64; pair (b,) int32, each row's pair p, or (k, b): k readings of
        the same y at once (the grid position found once). Returns (b, F) float64, or (k, b, F) (the transpose of a
        contiguous (k, F, b) block). ``one_search``: :meth:`read`."""
        out = self.read(y, pair, torch.float64, one_search)
        return out[0] if pair.ndim == 1 else out

    def searched_once(self, pair: np.ndarray) -> bool:
        """Whether the pairs (k, b) of every row share their searched pair (:attr:`search_pair`), so that one search
        serves the block's k readings: the host's answer for :meth:`read` (a device answering it waits)."""
        searched = self.search_pair[np.asarray(pair, dtype=np.int64)]
        return bool(searched.ndim == 1 or (searched == searched[:1]).all())

    def read(self, y: torch.Tensor, pair: torch.Tensor, dtype: torch.dtype = torch.float64,
             one_search: bool | None = None) -> torch.Tensor:
        """:meth:`__call__` written in ``dtype``: (k, b, F) (k = 1 for a pair of shape (b,)), the transpose of a
        contiguous (k, F, b) block. Each value is formed in float64 and rounded once to ``dtype`` (torch.float32:
        the same numbers as ``self(y, pair).float()``).

        When the k readings of every row of the block name pairs that share their knots (:attr:`search_pair`: the
        matched move's readings out of each row's own group), the block is searched once: one bucket, one knot, one
        y − knot per row, then each reading's value and slope; otherwise each reading is searched. ``one_search``:
        :meth:`searched_once` of the pairs where the caller holds them on the host (None: read from ``pair``, which on
        a device waits for it).

        On the CPU the block is read :data:`BLOCK_VALUES` values at a time (whole columns) through buffers kept per
        thread and shape, so that a chunk allocates nothing but its result (fresh pages for every temporary of a
        (16,384, 100) chunk cost as much as the reading itself)."""
        steps, lo, inv, last, first, per_pair, start, keys, block, shift = self._searcher(y.dtype)
        F, b = self.n_cols, y.shape[0]
        k = 1 if pair.ndim == 1 else pair.shape[0]
        pair = pair.view(k, b)
        searched = torch.index_select(block, 0, pair.reshape(-1)).view(k, b)          # each reading's searched block
        if one_search is None and k > 1 and shift is not None:
            one_search = torch.equal(searched[1:], searched[:1].expand(k - 1, b))
        ks = 1 if k == 1 or (shift is not None and one_search) else k
        per = F if y.device.type != "cpu" else max(1, min(F, BLOCK_VALUES // max(1, k * b)))
        bufs = self._buffers(y.dtype, keys.dtype, (k, ks, per, b), shift is not None)
        out = torch.empty((k, F, b), dtype=dtype, device=y.device)
        offset = torch.mul(searched[:ks].view(ks, 1, b), per_pair)                    # each search's bucket block
        moved = None if shift is None else torch.index_select(shift, 0, pair.reshape(-1)).view(k, 1, b)
        for f0 in range(0, F, per):
            cols = slice(f0, min(F, f0 + per))
            w = cols.stop - f0
            view, sview = (k, w, b), (ks, w, b)
            y64, yt, u, local, bucket, j, step, key, knot, jv, val, slope = (t[: t.numel() * w // per] for t in bufs)
            if y.dtype == torch.float64:
                y64 = yt = yt.view(w, b).copy_(y[:, cols].t())                      # (w, b): column by column
            else:                                                                    # float32: exact in float64, and
                y64 = y64.view(w, b).copy_(y[:, cols].t())                           # the one transposing copy
                yt = yt.view(w, b).copy_(y64)
            u = torch.sub(yt, lo[cols], out=u.view(w, b)).mul_(inv[cols]).clamp_min_(0)
            local = local.view(w, b).copy_(torch.minimum(u, last[cols], out=u)).add_(first[cols])
            torch.add(local, offset, out=bucket.view(sview))
            torch.index_select(start, 0, bucket, out=j)
            key_v, step_v = (key.view(sview), step.view(sview)) if steps else (key, step)
            for s in (2 ** i for i in reversed(range(steps))):                       # the last knot <= y
                torch.index_select(keys[s:], 0, j, out=key)                         # keys[j + s]
                torch.ge(yt, key_v, out=step_v)
                j.add_(step, alpha=s)
            knot = torch.index_select(self.knots, 0, j, out=knot).view(sview)
            gap = torch.sub(y64, knot, out=knot)                                      # y − knot, once per search
            if moved is not None:                                                     # each reading's own tables
                j = torch.add(j.view(sview), moved, out=jv.view(view)).view(-1)
            torch.index_select(self.values, 0, j, out=val)
            torch.index_select(self.slopes, 0, j, out=slope)
            out[:, cols] = val.view(view).addcmul_(gap, slope.view(view))
        return out.transpose(1, 2)

    def _buffers(self, y_dtype, key_dtype, shape: tuple, moved: bool) -> list[torch.Tensor]:
        """The calling thread's buffers of one block (k readings, ks searches, per columns, b rows), kept for the
        thread's last shape and dtype: y and its bucket arithmetic (per·b), the search (ks·per·b), each reading's
        table index (k·per·b, where the readings' tables are not the searched ones) and values (k·per·b)."""
        cache = self.__dict__.setdefault("_local", threading.local())
        spec = (y_dtype, key_dtype, shape, moved)
        if getattr(cache, "spec", None) != spec:
            k, ks, per, b = shape
            n, ns, dev = k * per * b, ks * per * b, self.device
            cache.bufs = ([torch.empty(0 if y_dtype == torch.float64 else per * b, dtype=torch.float64, device=dev)]
                          + [torch.empty(per * b, dtype=y_dtype, device=dev) for _ in range(2)]
                          + [torch.empty(per * b, dtype=torch.int32, device=dev)]
                          + [torch.empty(ns, dtype=torch.int32, device=dev) for _ in range(3)]
                          + [torch.empty(ns, dtype=key_dtype, device=dev), torch.empty(ns, dtype=torch.float64, device=dev)]
                          + [torch.empty(n if moved else 0, dtype=torch.int32, device=dev)]
                          + [torch.empty(n, dtype=torch.float64, device=dev) for _ in range(2)])
            cache.spec = spec
        return cache.bufs
