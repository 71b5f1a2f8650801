"""Wall and CPU seconds of the swap reading's reference fit (``FAuxTester.fit_reference``) at several d.

Set-up per d (each in its own worker process): :func:`bench_scoring.build_swap` on ``--rows + --holdout`` rows of
:func:`bench_scoring.carried_rows` (binary c drawn first, every feature's mean moved by c by 2/√d sd, so every
feature carries c and none is independent of it) with an auxiliary model trained on the first 20,000 rows; then
``fit_reference`` with the shipped settings (metric ``"matched"``, the independence test and the joint test of the
held block on) on the first ``--rows`` rows and the informativeness test on the next ``--holdout`` rows. Only the
fit is timed (the auxiliary model's training and the imports are not); its stages are timed by wrapping the
library's functions: ``informativeness`` (:func:`faux_checks.method.held.uninformative_features`), ``independence``
(:func:`faux_checks.method.held.independent_features`), ``joint`` (:func:`faux_checks.method.joint_hold.jointly_free_hold`,
with ``partners``: its search for free joint-only members), ``reference`` (the metric, shifts, matching, joint move,
level models and guard).

Printed per d: rows, the features held by the tests, the features released by the joint test and its steps (fits
of the block), the features the move moves (``free``), and seconds. A worker that runs past ``--timeout`` is stopped
and reported as such.

``--compare-with CHECKOUT`` runs every d a second time with the ``faux_checks`` package of CHECKOUT (a folder
holding ``faux_checks/``): before and after a change in one run, the arms interleaved per d.

Run: ``python benchmarks/bench_reference_fit.py --d 20,100,400`` (a few minutes on 2 quiet cores; more at load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

_LIBRARY = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--library=")), None)
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _LIBRARY or os.path.dirname(_HERE))
sys.path.insert(1, _HERE)

GOAL_S = 10.0
GOAL_D = 400


def _stage_clock(stages: dict):
    """Wrap the fit's stages (module attributes) so each call adds its wall and CPU seconds to ``stages``."""
    import faux_checks.method.faux as faux
    import faux_checks.method.held as held
    import faux_checks.method.joint_hold as joint_hold

    def wrap(module, attr: str, name: str) -> None:
        fn = getattr(module, attr, None)
        if fn is None:
            return

        def timed(*a, **kw):
            w, c = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                got = stages.setdefault(name, [0.0, 0.0])
                got[0] += time.perf_counter() - w
                got[1] += time.process_time() - c

        setattr(module, attr, timed)

    wrap(held, "uninformative_features", "informativeness")
    wrap(held, "independent_features", "independence")
    wrap(held, "jointly_free_hold", "joint")
    wrap(joint_hold, "_free_partners", "partners")
    wrap(faux.FAuxTester, "_fitted_reference", "reference")


def run_worker(d: int, args) -> dict:
    import numpy as np
    import torch

    from bench_scoring import build_swap
    from faux_checks import FAuxTester, TargetOutput

    torch.set_num_threads(args.threads)
    X, c, target, aux = build_swap(args.rows + args.holdout, "binary", d=d)
    import scipy.stats  # noqa: F401  (imports outside the clock)
    import sklearn.ensemble  # noqa: F401
    import sklearn.metrics  # noqa: F401

    stages: dict = {}
    _stage_clock(stages)
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput(form="logit", target_class=1))
    ref, hold = slice(0, args.rows), slice(args.rows, args.rows + args.holdout)
    w, cpu = time.perf_counter(), time.process_time()
    tester.fit_reference(X[ref], c[ref], holdout=(X[hold], c[hold]))
    wall, cpu = time.perf_counter() - w, time.process_time() - cpu
    joint = tester.joint_hold_ or {}
    released = sum(len(g) for g in joint.get("released", []))
    return {"d": d, "rows": args.rows, "holdout": args.holdout, "wall_s": wall, "cpu_s": cpu,
            "held_by_tests": int(np.asarray(tester.held_fixed_).sum()) + released, "released": released,
            "joint_fits": len(joint.get("steps", [])), "held": int(np.asarray(tester.held_fixed_).sum()),
            "free": int((~tester.reference.admissible).sum()), "joint_free": len(joint.get("joint_free", [])),
            "stages": stages, "aux_quality": float(aux.quality_)}


def spawn(d: int, args, library: str | None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(d), "--rows", str(args.rows),
           "--holdout", str(args.holdout), "--threads", str(args.threads),
           *([f"--library={os.path.abspath(library)}"] if library else [])]
    arm = os.path.basename(os.path.abspath(library)) if library else "this checkout"
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        res = {"d": d, "rows": args.rows, "timed_out": True, "wall_s": float(args.timeout)}
    else:
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise SystemExit(f"worker d={d} ({arm}) failed with exit code {proc.returncode}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["arm"] = arm
    res["load_avg_1min_after"] = os.getloadavg()[0]
    print(f"  [d={d} {arm}: {time.perf_counter() - t0:.1f} s with set-up, load average {res['load_avg_1min_after']:.1f}]",
          file=sys.stderr, flush=True)
    return res


def print_table(results: list[dict], args) -> None:
    print(f"\nreference fit (binary c, every feature carries c; {args.rows:,} reference + {args.holdout:,} hold-out rows; "
          f"{os.cpu_count()} CPUs; wall s (CPU s))")
    print(f"{'arm':<16} {'d':>4} {'held by tests':>13} {'released':>8} {'fits':>4} {'free':>5} {'fit s':>16} "
          f"{'informative':>13} {'independent':>13} {'joint':>15} {'partners':>13} {'reference':>13} {'load':>5}")
    for r in results:
        if r.get("timed_out"):
            print(f"{r['arm']:<16} {r['d']:>4} {'':>13} {'':>8} {'':>4} {'':>5} {'> ' + format(r['wall_s'], '.0f'):>16}"
                  f"{'(stopped)':>14} {'':>13} {'':>15} {'':>13} {'':>13} {r['load_avg_1min_after']:>5.1f}")
            continue
        st = r["stages"]

        def cell(name: str, width: int = 13, st: dict = st) -> str:
            w, c = st.get(name, (0.0, 0.0))
            return format(f"{w:.2f} ({c:.2f})", f">{width}")

        fit = f"{r['wall_s']:.2f} ({r['cpu_s']:.2f})"
        print(f"{r['arm']:<16} {r['d']:>4} {r['held_by_tests']:>13} {r['released']:>8} {r['joint_fits']:>4} "
              f"{r['free']:>5} {fit:>16} "
              f"{cell('informativeness')} {cell('independence')} {cell('joint', 15)} {cell('partners')} "
              f"{cell('reference')} {r['load_avg_1min_after']:>5.1f}")
    ours = [r for r in results if r["arm"] == "this checkout" and r["d"] == GOAL_D]
    if ours:
        r = ours[0]
        met = not r.get("timed_out") and r["wall_s"] <= GOAL_S
        print(f"\ngoal: the fit at d = {GOAL_D} in at most {GOAL_S:.0f} s on a quiet 2-core machine: "
              f"{r['wall_s']:.1f} s wall here, {'met' if met else 'not met'} (load {r['load_avg_1min_after']:.1f})")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d", default="20,100,400", help="comma-separated encoded feature counts (default 20,100,400)")
    ap.add_argument("--rows", type=int, default=20_000, help="reference rows (default 20,000: the reference cap)")
    ap.add_argument("--holdout", type=int, default=10_000, help="hold-out rows of the informativeness test")
    ap.add_argument("--threads", type=int, default=2, help="torch threads set by the caller (the fit sets its own)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per worker, set-up included (default 600)")
    ap.add_argument("--compare-with", default=None, metavar="CHECKOUT", help="also run with this checkout's library")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    ap.add_argument("--library", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(run_worker(int(args.worker), args)))
        return
    results = []
    for d in (int(x) for x in args.d.split(",") if x):
        if args.compare_with:
            results.append(spawn(d, args, args.compare_with))
        results.append(spawn(d, args, None))
    print_table(results, args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"results": results, "args": vars(args)}, fh, indent=2)


if __name__ == "__main__":
    main()
