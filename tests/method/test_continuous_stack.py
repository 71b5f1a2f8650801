"""A continuous c's matched move read at once for m shifts (:class:`faux_checks.method.shifts.ContinuousStack`) equals
each shift's numpy goal (:meth:`faux_checks.method.shifts.ContinuousShift.goal`, np.interp per bin) to 1e-12, in one
block and in the CPU's column blocks, with and without held features; the union-knot rank tables
(:class:`faux_checks.method.shifts.RankPairTables`) equal np.interp on each of the two bins."""

import numpy as np
import pytest
import torch

import faux_checks.method.shifts as shifts_mod
from faux_checks.method.quantiles import quantile_ranks
from faux_checks.method.shifts import ContinuousShift, ContinuousStack, RankPairTables

ATOL = 1e-12
B, Q = 6, 101


def _shifts(rng, m: int, d_a: int) -> list[ContinuousShift]:
    """m shifts on the same bins: random residual quantiles (one bin with a run of ties, one with a single level)."""
    centers = np.sort(rng.normal(size=B)) * 2
    out = []
    for f in range(m):
        quantiles = np.sort(rng.normal(size=(B, Q)) * (1 + f), axis=1)
        quantiles[1, 20:60] = quantiles[1, 20]
        if f == 0:
            quantiles[3, :] = 0.5                                            # one level in a whole bin
        out.append(ContinuousShift(centers=centers, coefs=rng.normal(size=(B, 1 + d_a)), quantiles=quantiles,
                                   sd=1.3, slope=0.4 * f - 0.5))
    return out


def _rows(rng, shift: ContinuousShift, n: int, m: int, d_a: int):
    c = np.concatenate([rng.normal(size=n - 4) * 3, shift.centers[[0, 2, -1]], [shift.centers[-1] + 10]])
    return rng.normal(size=(n, m)) * 3, c, rng.normal(size=(n, d_a))


@pytest.mark.parametrize("d_a", [0, 2])
@pytest.mark.parametrize("tile", [None, 2 * 2 * 300])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_stack_equals_each_shifts_numpy_goal_in_one_block_and_in_column_blocks(d_a, tile, threads, monkeypatch):
    rng = np.random.default_rng(21)
    m, n = 5, 300
    shifts = _shifts(rng, m, d_a)
    v, c, xa = _rows(rng, shifts[0], n, m, d_a)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)         # 2: the blocks shared out among 2 threads
    if tile is not None:
        monkeypatch.setattr(shifts_mod, "CPU_TILE_ELEMENTS", tile)          # blocks of 2, 2 and 1 shifts (2 targets)
        monkeypatch.setattr(shifts_mod, "SERIAL_ELEMENTS", tile)
    stack = ContinuousStack(shifts, torch.device("cpu"))
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    got = stack.goals(t(v), t(c), t(xa) if d_a else None, (1.0, -1.0))
    for sign, block in zip((1.0, -1.0), got, strict=True):
        want = np.stack([s.goal(v[:, f], c, xa, sign) for f, s in enumerate(shifts)], axis=1)
        assert np.isfinite(want).all() and block.shape == (n, m)
        np.testing.assert_allclose(block.numpy(), want, rtol=0, atol=ATOL)
    assert not np.allclose(got[0].numpy(), got[1].numpy())                   # the two signs are read, not one


def test_the_rank_pair_tables_equal_np_interp_on_both_bins():
    rng = np.random.default_rng(22)
    m = 3
    shifts = _shifts(rng, m, 0)
    tables = RankPairTables(shifts, torch.device("cpu"))
    for f, s in enumerate(shifts):
        for p in range(B - 1):
            (lv_p, r_p), (lv_q, r_q) = quantile_ranks(s.quantiles[p]), quantile_ranks(s.quantiles[p + 1])
            y = np.concatenate([rng.normal(size=400) * 4 * (1 + f), lv_p, lv_q, [lv_p[0] - 1, lv_q[-1] + 1]])
            base = torch.full((1, len(y)), (f * (B - 1) + p) * shifts_mod.RANK_BUCKETS, dtype=torch.int64)
            got_p, got_q = tables(torch.as_tensor(y)[None], base, tables.lo[f:f + 1, None],
                                  tables.inv_width[f:f + 1, None])
            np.testing.assert_allclose(got_p[0].numpy(), np.interp(y, lv_p, r_p), rtol=0, atol=ATOL)
            np.testing.assert_allclose(got_q[0].numpy(), np.interp(y, lv_q, r_q), rtol=0, atol=ATOL)
