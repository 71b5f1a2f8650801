"""What a compiled read of the matched move's tables would give: ``BucketTables.read`` in one numba kernel.

Not the library: numba is not one of its dependencies. This measures the proposal behind the binary and 3-class
goals of ``bench_scoring.py`` (the read is five 1-D gathers and about twelve elementwise passes, each a pass over
the chunk in torch; the kernel does one bucket lookup, the search steps and the interpolation per value, columns
shared out over the threads). Run it where numba is installed (``pip install numba``; 0.68.1 was measured):

``python benchmarks/bench_compiled_read.py --kinds binary,3class --rows 400000``

Per kind it builds the swap case of ``bench_scoring.py`` (:func:`bench_scoring.build_swap`: every feature carries c,
an auxiliary model trained on 20,000 rows, the shipped reading, every feature free), then

- the read alone on one (16,384, 100) float32 chunk: torch's ``BucketTables.read`` against the kernel, the outputs
  compared bit for bit, median of 30 alternating rounds, and the kernel on one thread;
- ``FAuxTester.evaluate`` on ``--rows`` rows with each read (the kernel patched in for float32 reads whose readings
  share one search), the scores compared bit for bit, and the autograd floor (``bench_scoring.floor_pass``),
  interleaved, best of ``--repeats``.

Each kind prints a line ``case=compiled-read-<kind> free= rows= d= device=cpu threads= ratio_to_floor_torch=
ratio_to_floor_compiled= read_ms_torch= read_ms_compiled= scores_equal=``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))
sys.path.insert(1, _HERE)


def _kernels():
    """The compiled reads: y (b, F) float32 and each row's bucket block (b,) int32; ``one`` writes one reading (1, F, b),
    ``several`` k readings (k, F, b) at the same position of their own tables (shift (k, b) int32)."""
    import numpy as np
    from numba import njit, prange

    @njit(inline="always")
    def position(yv, lo_f, inv_f, last_f, first_f, row, steps, start, keys):
        u = (yv - lo_f) * inv_f                              # BucketTables' bucket formula, in float32
        if u < np.float32(0.0):
            u = np.float32(0.0)
        if u > last_f:
            u = last_f
        j = start[np.int32(u) + first_f + row]
        s = steps
        while s > 0:                                         # the last knot <= y, without a branch
            s -= 1
            step = 1 << s
            j += step * np.int32(yv >= keys[j + step])
        return j

    @njit(parallel=True, fastmath=False, boundscheck=False)
    def one(y, block, steps, lo, inv, last, first, start, keys, knots, values, slopes, out):
        b, F = y.shape
        for f in prange(F):
            for i in range(b):
                yv = y[i, f]
                j = position(yv, lo[f], inv[f], last[f], first[f], block[i], steps, start, keys)
                out[0, f, i] = np.float32(values[j] + (np.float64(yv) - knots[j]) * slopes[j])

    @njit(parallel=True, fastmath=False, boundscheck=False)
    def several(y, block, shift, steps, lo, inv, last, first, start, keys, knots, values, slopes, out):
        b, F = y.shape
        for f in prange(F):
            for i in range(b):
                yv = y[i, f]
                j = position(yv, lo[f], inv[f], last[f], first[f], block[i], steps, start, keys)
                gap = np.float64(yv) - knots[j]
                for r in range(out.shape[0]):
                    jr = j + shift[r, i]
                    out[r, f, i] = np.float32(values[jr] + gap * slopes[jr])
    return one, several


def _patched_read(kernels, original):
    """BucketTables.read with the kernel for float32 values read in float32 whose readings share one search."""
    import numpy as np
    import torch

    def read(self, y, pair, dtype=torch.float64, one_search=None):
        k = 1 if pair.ndim == 1 else pair.shape[0]
        if dtype != torch.float32 or y.dtype != torch.float32 or y.device.type != "cpu" or (k > 1 and not one_search):
            return original(self, y, pair, dtype, one_search)
        steps, lo, inv, last, first, per_pair, start, keys, block, shift = self._searcher(torch.float32)
        flat = self.__dict__.setdefault("_compiled", tuple(np.ascontiguousarray(a) for a in (
            lo.numpy()[:, 0], inv.numpy()[:, 0], last.numpy()[:, 0], first.numpy()[:, 0], start.numpy(), keys.numpy(),
            self.knots.numpy(), self.values.numpy(), self.slopes.numpy())))
        codes = pair.reshape(k, -1).numpy()
        rows = (block.numpy()[codes[0]] * np.int32(per_pair)).astype(np.int32)
        out = np.empty((k, self.n_cols, y.shape[0]), dtype=np.float32)
        if k == 1:
            kernels[0](y.numpy(), rows, int(steps), *flat, out)
        else:
            moved = (np.zeros(codes.shape, dtype=np.int32) if shift is None
                     else np.ascontiguousarray(shift.numpy()[codes]).astype(np.int32))
            kernels[1](y.numpy(), rows, moved, int(steps), *flat, out)
        return torch.from_numpy(out).transpose(1, 2)
    return read


def run_kind(kind: str, args) -> str:
    import numpy as np
    import torch

    import bench_scoring as bs
    from faux_checks import FAuxTester, TargetOutput
    from faux_checks.method import quantiles

    X, groups, target, aux = bs.build_swap(args.rows, kind, d=args.d)
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput(form="logit", target_class=1),
                        chunk_size=16384)
    tester.fit_reference(X[:20000], groups[:20000])
    free = int((~tester.reference.admissible).sum())
    pairs, tables = tester.reference.matching.pair_tables(torch.device("cpu"))
    g = groups[:16384].astype(np.int64)
    m = pairs.shape[0]
    code = np.stack([pairs[g, (g + t) % m] for t in range(1, m)])
    y, pair = X[:16384].float().contiguous(), torch.as_tensor(code.astype(np.int32))
    original = quantiles.BucketTables.read
    compiled = _patched_read(_kernels(), original)
    shared = tables.searched_once(code)
    want = original(tables, y, pair, torch.float32, shared)
    got = compiled(tables, y, pair, torch.float32, shared)         # the first call compiles
    read_equal = bool(torch.equal(want, got))
    import numba

    times: dict = {"torch": [], "compiled": []}
    for _ in range(30):
        for name, fn in (("torch", original), ("compiled", compiled)):
            t0 = time.perf_counter()
            fn(tables, y, pair, torch.float32, shared)
            times[name].append(time.perf_counter() - t0)
    numba.set_num_threads(1)
    one = []
    for _ in range(10):
        t0 = time.perf_counter()
        compiled(tables, y, pair, torch.float32, shared)
        one.append(time.perf_counter() - t0)
    numba.set_num_threads(args.threads)
    scores = {}
    runs: dict = {"floor": [], "torch": [], "compiled": []}
    for name, fn in (("torch", original), ("compiled", compiled)):
        quantiles.BucketTables.read = fn
        scores[name] = tester.evaluate(X, groups, evidence=False).scores
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        bs.floor_pass(target, aux, X, 16384)
        runs["floor"].append(time.perf_counter() - t0)
        for name, fn in (("torch", original), ("compiled", compiled)):
            quantiles.BucketTables.read = fn
            t0 = time.perf_counter()
            tester.evaluate(X, groups, evidence=False)
            runs[name].append(time.perf_counter() - t0)
    quantiles.BucketTables.read = original
    floor = min(runs["floor"])
    equal = bool(np.array_equal(scores["torch"], scores["compiled"], equal_nan=True)) and read_equal
    print(f"  [{kind}: floor {[round(t, 3) for t in runs['floor']]}, torch read {[round(t, 3) for t in runs['torch']]}, "
          f"compiled read {[round(t, 3) for t in runs['compiled']]} s; the kernel on one thread "
          f"{1000 * float(np.median(one)):.2f} ms a chunk]")
    return (f"case=compiled-read-{kind} free={free} rows={args.rows} d={args.d} device=cpu threads={args.threads} "
            f"ratio_to_floor_torch={min(runs['torch']) / floor:.3f} ratio_to_floor_compiled={min(runs['compiled']) / floor:.3f} "
            f"read_ms_torch={1000 * float(np.median(times['torch'])):.2f} "
            f"read_ms_compiled={1000 * float(np.median(times['compiled'])):.2f} scores_equal={equal}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="binary,3class", help="comma-separated: binary, 3class")
    ap.add_argument("--rows", type=int, default=400_000, help="rows scored by evaluate (default 400,000)")
    ap.add_argument("--d", type=int, default=100, help="encoded features (default 100)")
    ap.add_argument("--repeats", type=int, default=4, help="interleaved floor/torch/compiled runs; best kept")
    ap.add_argument("--threads", type=int, default=2, help="torch and numba threads (default 2)")
    args = ap.parse_args(argv)
    try:
        import numba
    except ImportError:
        raise SystemExit("bench_compiled_read.py measures a proposal that needs numba: pip install numba") from None
    import torch

    torch.set_num_threads(args.threads)
    numba.set_num_threads(args.threads)
    lines = [run_kind(kind, args) for kind in args.kinds.split(",")]
    print(f"numba {numba.__version__}, threading layer {numba.threading_layer()}, torch {torch.__version__}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
