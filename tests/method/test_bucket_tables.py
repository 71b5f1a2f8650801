"""BucketTables (the matched move's stacked tables) reads each table as np.interp does: the same knot found by a
bucket lookup and a few fixed search steps, for float32 and float64 values, dense and sparse knots alike.

Closed form: ``np.interp(y, knots, values)`` per (row pair, column) table; the value is PiecewiseTables' formula
``values[j] + (y − knots[j]) · slopes[j]`` (one addcmul), so the comparison is to a few ulp, and exact where y is a
knot (its value) or outside the knots (the end values).
"""

import numpy as np
import pytest
import torch

from faux_checks.method.quantiles import BucketTables, PiecewiseTables, round_up_float32

P, F, B = 3, 4, 500


def _tables(rng, dense: bool):
    """P·F tables over F columns; ``dense``: knots that crowd a narrow stretch of a wide range (several per bucket)."""
    knots, values = [], []
    for t in range(P * F):
        k = np.sort(rng.standard_normal(200 + 37 * t))
        if dense:
            k = np.concatenate([k * 1e-4, [-50.0, 50.0]])                     # 1e-4 wide stretch, range 100
        k = np.unique(k)
        knots.append(k)
        values.append(np.cumsum(rng.exponential(size=len(k))) - 5.0)
    ranges = np.array([[min(knots[p * F + f][0] for p in range(P)), max(knots[p * F + f][-1] for p in range(P))]
                       for f in range(F)])
    return knots, values, ranges


def _want(knots, values, y: np.ndarray, pair: np.ndarray) -> np.ndarray:
    out = np.empty(y.shape)
    for p in range(P):
        rows = pair == p
        for f in range(F):
            out[rows, f] = np.interp(y[rows, f], knots[p * F + f], values[p * F + f])
    return out


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bucket_tables_read_every_table_as_np_interp(dense, dtype):
    rng = np.random.default_rng(5 + dense)
    knots, values, ranges = _tables(rng, dense)
    tables = BucketTables(knots, values, ranges, torch.device("cpu"))
    scale = 1e-4 if dense else 1.0
    y = rng.standard_normal((B, F)) * scale * 1.5
    pair = rng.integers(0, P, B)
    y[:6, 0] = [knots[pair[i] * F][i * 7] for i in range(6)]                    # exactly at knots
    y[6:8, 1] = [-1e3, 1e3]                                                      # below and above every knot
    y_t = torch.as_tensor(y, dtype=dtype)
    got = tables(y_t, torch.as_tensor(pair.astype(np.int32)))
    want = _want(knots, values, y_t.double().numpy(), pair)
    assert got.dtype == torch.float64 and got.shape == (B, F)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    at_knots = [values[pair[i] * F][i * 7] for i in range(6)]
    if dtype == torch.float64:
        assert got[:6, 0].tolist() == at_knots
    search = PiecewiseTables(knots, values, np.tile(ranges, (P, 1)), torch.device("cpu"))   # a binary search per table
    tid = torch.as_tensor(pair * F)[:, None] + torch.arange(F)
    assert torch.equal(got, search(y_t.double(), tid))                       # the same knot, the same formula: bit for bit
    assert got[6, 1].item() == values[pair[6] * F + 1][0] and got[7, 1].item() == values[pair[7] * F + 1][-1]


def test_dense_knots_take_more_search_steps_and_sparse_ones_one():
    rng = np.random.default_rng(2)
    sparse = BucketTables(*_tables(rng, False), torch.device("cpu"))
    dense = BucketTables(*_tables(rng, True), torch.device("cpu"))
    assert sparse._grids[torch.float64][2] <= 2 and sparse._grids[torch.float32][2] <= 2     # random knots: a close pair
    assert dense._grids[torch.float64][2] > 3                                   # hundreds of knots share a bucket


def _grid_by_table(knots, ranges, dtype):
    """The grid of each column, table by table: (bucket count per column, knots per bucket of each table, steps)."""
    from faux_checks.method.quantiles import BUCKET_COUNTS

    np_type = np.float32 if dtype == torch.float32 else np.float64

    def buckets(t, count):
        lo, hi = ranges[t % F]
        y = round_up_float32(knots[t]) if dtype == torch.float32 else knots[t]
        inv, lo_, last = np_type(count / (hi - lo)), np_type(lo), np_type(count - 1)
        return np.minimum(np.maximum((y - lo_) * inv, 0), last).astype(np.int32)

    most = {count: np.array([np.bincount(buckets(t, count)).max() for t in range(P * F)]).reshape(P, F).max(axis=0)
            for count in BUCKET_COUNTS}
    steps = int(np.ceil(np.log2(most[BUCKET_COUNTS[-1]].max() + 1)))
    nb = np.array([next(c for c in BUCKET_COUNTS if most[c][f] <= 2 ** steps - 1) for f in range(F)])
    return nb, [np.bincount(buckets(t, nb[t % F]), minlength=nb[t % F]) for t in range(P * F)], steps


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_each_columns_grid_is_the_coarsest_that_needs_no_more_steps_than_the_finest(dense, dtype):
    """The grid BucketTables builds for all tables at once equals one built table by table: each column's bucket
    count, the knots in every bucket of every table, and the search steps."""
    rng = np.random.default_rng(13 + dense)
    knots, values, ranges = _tables(rng, dense)
    knots[1] = knots[1][:1]                                                     # a table of one knot
    values[1] = values[1][:1]
    nb, counts, steps = BucketTables(knots, values, ranges, torch.device("cpu"))._grids[dtype]
    want_nb, want_counts, want_steps = _grid_by_table(knots, ranges, dtype)
    assert steps == want_steps and nb.tolist() == want_nb.tolist()
    assert len(counts) == P * F and all(np.array_equal(c, w) for c, w in zip(counts, want_counts, strict=True))
    assert len(set(nb.tolist())) > 1 or dense                                  # the columns' counts differ here


def _edge_tables():
    """P·F tables over [0, 8] whose decisive runs sit where a vectorised grid goes wrong first: column 0's longest run
    is its table's first (4 knots in one bucket of 2,048, 2 + 2 in 4,096) and a later run of 3 splits 2 + 1 at
    8,192; column 1 has 3 knots 1e-9 apart (2 search steps); column 2 ends with 3 knots in the bucket where column
    3 starts with 3 more; column 3's other knots sit 3/4 of a float32 ulp below bucket edges (rounded up: the
    edge's bucket)."""
    rng = np.random.default_rng(3)
    w = 8 / 2048
    knots = []
    for t in range(P * F):
        f = t % F
        if f == 0:
            k = np.concatenate([w * np.array([25.1, 25.3, 25.6, 25.8]), 4 + np.linspace(-3, 1.5, 30),
                                w / 2 * np.array([3000.1, 3000.3, 3000.6])])
        elif f == 1:
            k = 4.1 + 1e-9 * np.arange(3)
        elif f == 2:
            k = np.concatenate([4 + np.linspace(-3.9, 0.2, 40), 4.25 + 1e-9 * np.arange(3)])
        else:
            edges = 8 * 32 * rng.integers(1103, 2047, 60) / 65536
            k = np.concatenate([4.25 + 1e-9 * np.arange(3, 6),
                                edges - 0.75 * np.spacing(edges.astype(np.float32)).astype(np.float64)])
        knots.append(np.unique(k))
    knots[1] = knots[1][:1]                                                     # a table of one knot
    return knots, [np.arange(len(k), dtype=np.float64) for k in knots], np.array([[0.0, 8.0]] * F)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_grid_holds_at_table_edges_and_float32_bucket_edges(dtype):
    knots, values, ranges = _edge_tables()
    nb, counts, steps = BucketTables(knots, values, ranges, torch.device("cpu"))._grids[dtype]
    want_nb, want_counts, want_steps = _grid_by_table(knots, ranges, dtype)
    assert steps == want_steps == 2 and nb.tolist() == want_nb.tolist()
    assert all(np.array_equal(c, w) for c, w in zip(counts, want_counts, strict=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("span", [1e-37, 1e-305])
def test_a_column_narrower_than_its_buckets_can_express_reads_as_np_interp(span, dtype):
    """A range so narrow that buckets / span overflows the values' dtype (1e-37 for float32, 1e-305 for
    float64) is read like any other, not as 0 · inf = NaN buckets."""
    knots = [np.array([0.0, span / 2, span])]
    values = [np.array([1.0, 2.0, 4.0])]
    tables = BucketTables(knots, values, np.array([[0.0, span]]), torch.device("cpu"))
    y = np.array([-1.0, 0.0, span / 4, span / 2, span, 2 * span, 1.0])
    y_t = torch.as_tensor(y, dtype=dtype)[:, None]
    got = tables(y_t, torch.zeros(len(y), dtype=torch.int32))[:, 0].numpy()
    np.testing.assert_allclose(got, np.interp(y_t[:, 0].double().numpy(), knots[0], values[0]), rtol=1e-6)


def test_round_up_float32_keeps_every_comparison_with_a_float32():
    rng = np.random.default_rng(0)
    k = np.concatenate([rng.standard_normal(1000), [0.0, 1e39, -1e39, np.inf]])
    up = round_up_float32(k)
    assert up.dtype == np.float32 and (up.astype(np.float64) >= k).all()
    with np.errstate(over="ignore"):
        y = np.concatenate([k.astype(np.float32), np.nextafter(k.astype(np.float32), np.float32(-np.inf))])
    np.testing.assert_array_equal(k[None, :] <= y[:, None].astype(np.float64), up[None, :] <= y[:, None])


def _two_pair_block(seed: int):
    """Moderate tables on the CPU, a (B, F) float32 block and (2, B) int32 pair indices, from ``seed``."""
    rng = np.random.default_rng(seed)
    knots, values, ranges = _tables(rng, False)
    tables = BucketTables(knots, values, ranges, torch.device("cpu"))
    y = torch.as_tensor(rng.standard_normal((B, F)), dtype=torch.float32)
    return tables, y, torch.as_tensor(rng.integers(0, P, (2, B)).astype(np.int32))


def test_k_readings_of_one_block_equal_k_separate_readings():
    tables, y, pairs = _two_pair_block(9)
    both = tables(y, pairs)
    assert both.shape == (2, B, F)
    assert torch.equal(both[0], tables(y, pairs[0])) and torch.equal(both[1], tables(y, pairs[1]))


def test_read_in_float32_rounds_the_float64_reading_once_block_by_block(monkeypatch):
    """BucketTables.read(..., torch.float32) equals the float64 reading rounded to float32, bit for bit, when the
    block is read a few columns at a time (BLOCK_VALUES smaller than the block) and when it is read at once."""
    import faux_checks.method.quantiles as q

    tables, y, pairs = _two_pair_block(11)
    want = tables(y, pairs)
    monkeypatch.setattr(q, "BLOCK_VALUES", 2 * B)                             # one column per block
    got = tables.read(y, pairs, torch.float32)
    assert got.dtype == torch.float32 and got.shape == (2, B, F)
    assert torch.equal(got, want.float()) and torch.equal(tables(y, pairs), want)
    assert tables.finite_float32                                            # moderate tables: no row to check



def _tables_out_of_groups(rng, m: int = 3):
    """The matched move's layout: m·(m − 1) ordered pairs (a, b), a ≠ b, in sorted order; the tables of pairs out of
    one group a share their knots (a's quantiles) and differ in their values (b's)."""
    pairs = [(a, b) for a in range(m) for b in range(m) if a != b]
    knots_of = {a: [np.unique(rng.standard_normal(150 + 20 * f + 7 * a)) for f in range(F)] for a in range(m)}
    knots = [knots_of[a][f] for a, _ in pairs for f in range(F)]
    values = [np.cumsum(rng.exponential(size=len(k))) - 3.0 * b for (_, b), k in
              zip([p for p in pairs for _ in range(F)], knots, strict=True)]
    ranges = np.array([[min(knots_of[a][f][0] for a in range(m)), max(knots_of[a][f][-1] for a in range(m))]
                       for f in range(F)])
    return pairs, knots, values, ranges


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_readings_out_of_one_group_are_searched_once_and_read_their_own_tables(dtype):
    """Pairs out of one group share their knots: one search serves both readings of a row (3 searched pairs of 6),
    and each reading still takes its own pair's values, bit for bit those of a binary search per table. A block whose
    readings come out of different groups is searched per reading, with the same result."""
    rng = np.random.default_rng(21)
    pairs, knots, values, ranges = _tables_out_of_groups(rng)
    tables = BucketTables(knots, values, ranges, torch.device("cpu"))
    assert tables.search_pair.tolist() == [0, 0, 2, 2, 4, 4]
    assert tables._searcher(dtype).start.numel() == 3 * int(tables._grids[dtype][0].sum())   # 3 pairs' buckets
    index = {p: i for i, p in enumerate(pairs)}
    group = rng.integers(0, 3, B)
    other = np.stack([(group + 1) % 3, (group + 2) % 3])
    shared = np.array([[index[(a, b)] for a, b in zip(group, o, strict=True)] for o in other], dtype=np.int32)
    mixed = rng.integers(0, len(pairs), (2, B)).astype(np.int32)
    y_t = torch.as_tensor(rng.standard_normal((B, F)) * 1.2, dtype=dtype)
    y_t[:5, 2] = torch.as_tensor([knots[shared[1, i] * F + 2][3 * i] for i in range(5)], dtype=dtype)   # at knots
    search = PiecewiseTables(knots, values, np.tile(ranges, (len(pairs), 1)), torch.device("cpu"))
    for code, searches in ((shared, 1), (mixed, 2)):
        got = tables(y_t, torch.as_tensor(code))
        assert tables._local.spec[2][:2] == (2, searches)                   # (readings, searches) of the block
        assert tables.searched_once(code) == (searches == 1)                 # the host's answer
        assert torch.equal(tables(y_t, torch.as_tensor(code), tables.searched_once(code)), got)
        assert tables._local.spec[2][:2] == (2, searches)
        for r in range(2):
            tid = torch.as_tensor(code[r].astype(np.int64) * F)[:, None] + torch.arange(F)
            assert torch.equal(got[r], search(y_t.double(), tid)), r
            np.testing.assert_allclose(got[r].numpy(), _want_pairs(knots, values, y_t.double().numpy(), code[r]),
                                       rtol=1e-12, atol=1e-12)
        assert torch.equal(tables.read(y_t, torch.as_tensor(code), torch.float32), got.float())


def _want_pairs(knots, values, y: np.ndarray, pair: np.ndarray) -> np.ndarray:
    out = np.empty(y.shape)
    for p in np.unique(pair):
        rows = pair == p
        for f in range(F):
            out[rows, f] = np.interp(y[rows, f], knots[p * F + f], values[p * F + f])
    return out


def test_pairs_share_a_search_only_where_every_columns_knots_are_equal_and_unshared_readings_of_one_pair_read_alike():
    """Knots [1, 2] | [3] and [1] | [2, 3] concatenate alike but differ per column: two searched pairs. Readings of
    tables that share nothing are searched one by one, also where every row names the same pair k times."""
    knots = [np.array([1.0, 2.0]), np.array([3.0]), np.array([1.0]), np.array([2.0, 3.0])]
    values = [np.array([0.0, 10.0]), np.array([7.0]), np.array([5.0]), np.array([5.0, 25.0])]
    tables = BucketTables(knots, values, np.array([[1.0, 2.0], [2.0, 3.0]]), torch.device("cpu"))
    assert tables.search_pair.tolist() == [0, 1]
    y = torch.tensor([[1.5, 2.5], [0.0, 4.0], [2.0, 3.0]], dtype=torch.float64)
    for code in ([[1, 1, 1], [1, 1, 1]], [[0, 1, 0], [0, 1, 0]], [[0, 1, 1], [1, 0, 0]]):
        pair = torch.tensor(code, dtype=torch.int32)
        got = tables(y, pair)
        for r in range(2):
            want = [[np.interp(y[i, f].item(), knots[code[r][i] * 2 + f], values[code[r][i] * 2 + f]) for f in range(2)]
                    for i in range(3)]
            assert got[r].tolist() == want, (code, r)
        assert tables._local.spec[2][:2] == (2, 2)
