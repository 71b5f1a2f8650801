"""The swap reading's cost against the autograd floor, measured steadily on a shared machine.

One process, 1 torch thread, CPU time (``time.process_time``: other processes' load does not count), the
floor (:func:`bench_scoring.floor_pass`) and ``FAuxTester(variant="swap").evaluate`` interleaved ``--repeats``
times on the same rows (:func:`bench_scoring.build_swap`: c carried by every feature, a trained auxiliary
model, the shipped reading, metric ``matched``, so every feature is free). Each pair prints its ratio; the
last line holds the median.

    python benchmarks/bench_swap_steady.py                              # n = 65,536, d = 100, binary and 3-class
    python benchmarks/bench_swap_steady.py --cases swap-binary --profile 30   # also cProfile one evaluate
    python benchmarks/bench_swap_steady.py --library=/tmp/before             # faux_checks from another checkout

Lines: ``case= free= rows= d= threads=1 ratios_cpu=[...] median_ratio_cpu= floor_cpu_s= evaluate_cpu_s=``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

# the library of this checkout, or of another one (``--library=PATH``: a before/after comparison, each in its own run)
_LIBRARY = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--library=")), None)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _LIBRARY or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_time(fn) -> float:
    """CPU seconds of this process while ``fn()`` runs."""
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def steady(case: str, args) -> dict:
    """Interleaved floor / evaluate CPU times for one swap case."""
    import torch

    import faux_checks
    from bench_scoring import build_swap, floor_pass
    from faux_checks import FAuxTester, TargetOutput

    assert args.library is None or faux_checks.__file__.startswith(os.path.abspath(args.library)), faux_checks.__file__

    torch.set_num_threads(1)
    c_kind = case.split("-")[1]
    X, groups, target, aux = build_swap(args.n, c_kind, d=args.d)
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput(form="logit", target_class=1),
                        **({} if args.chunk_size is None else {"chunk_size": args.chunk_size}))
    ref = slice(0, min(20_000, args.n))
    tester.fit_reference(X[ref], groups[ref])
    free = int((~tester.reference.admissible).sum())
    chunk = tester.chunk_size

    def evaluate():
        return tester.evaluate(X, groups, evidence=False)

    evaluate()                                                      # tables built, caches warm
    floors, evals = [], []
    for _ in range(args.repeats):
        floors.append(cpu_time(lambda: floor_pass(target, aux, X, chunk)))
        evals.append(cpu_time(evaluate))
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(evaluate)
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
    ratios = [e / f for e, f in zip(evals, floors, strict=True)]
    return {"case": case, "free": free, "rows": args.n, "d": args.d, "ratios": ratios,
            "median": statistics.median(ratios), "floor": statistics.median(floors),
            "evaluate": statistics.median(evals)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=65_536)
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--cases", default="swap-binary,swap-3class")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--chunk-size", type=int, default=None)
    ap.add_argument("--profile", type=int, default=0, metavar="LINES", help="cProfile one evaluate, print LINES rows")
    ap.add_argument("--library", default=None, help="import faux_checks from this directory (--library=PATH)")
    args = ap.parse_args(argv)
    for case in args.cases.split(","):
        r = steady(case, args)
        print(f"case={r['case']}{'@' + args.library if args.library else ''} free={r['free']} rows={r['rows']} d={r['d']} threads=1 "
              f"ratios_cpu=[{', '.join(f'{x:.2f}' for x in r['ratios'])}] median_ratio_cpu={r['median']:.3f} "
              f"floor_cpu_s={r['floor']:.3f} evaluate_cpu_s={r['evaluate']:.3f}", flush=True)


if __name__ == "__main__":
    main()
