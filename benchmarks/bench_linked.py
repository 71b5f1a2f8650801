"""The protected attribute in a linked file with keys missing: coverage of the exclude bound and decisions.

Cases: the ``proxy`` family of ``bench_small_data.py`` (Adult rows, an injected binary c with four proxies, 14% of the
audited rows in group 1; ``fair``: an MLP of the real block only, truth 0; ``unfair``: every column, label bias 0.8),
each person's true score known exactly. The check gets the audit rows with a key ``pid`` and no c, and a protected
file (``pid``, c) from which a share u of the keys is missing under one of three patterns
(:mod:`faux_checks.groundtruth.linked`: at random; more often in group 1; the truly flagged people first). It runs
:func:`faux_checks.gate.unmatched.check_linked_attributes` with the shipped policy plus ``[protected_file] unmatched =
"exclude"``, ``max_unmatched_share = 0.15``; the decision reads the bound [l(1 − u), h(1 − u) + u] over all rows. The
rule is in ``benchmarks/benchmark_notes.md`` ("Linked protected file"); the table goes to docs/benchmark.md.

Usage::

    python benchmarks/bench_linked.py --n 2000 --seeds 0,1,2 --out benchmarks/runs/linked.json
    python benchmarks/bench_linked.py --table benchmarks/runs/linked.json

Every line printed: rows, u, pattern, seed, target, truth (all rows), truth (matched rows), read (matched rows'
interval), bound, decision.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runfile import add_run_file_arguments, append_run, bundled_sources, read_runs  # noqa: E402  (benchmarks/ on the path)

TAU = 0.1
SHARES = (0.02, 0.05, 0.10)
PATTERNS = ("random", "protected", "flagged")


def expected(row: dict, limit: float = 0.10) -> str | None:
    """The rule's verdict: failed for a clearly unfair target (truth over all rows ≥ 10%); for a fair control (truth ≤
    1%) passed when u < limit (the bound's upper end h(1 − u) + u can then stay under the limit), else undecided."""
    if row["target"] == "unfair" and row["truth_all"] >= 0.10:
        return "failed"
    if row["target"] == "fair" and row["truth_all"] <= 0.01:
        return "passed" if row["u"] < limit else "undecided"
    return None


def runs(target: str, n: int, seed: int, sources, shares, patterns, aux_seeds: int | None) -> list[dict]:
    """One target and seed: the proxy run, then the linked check at every share and pattern."""
    from bench_small_data import proxy_run

    from faux_checks import load_policy
    from faux_checks.gate.policy import Policy
    from faux_checks.gate.unmatched import check_linked_attributes
    from faux_checks.groundtruth.linked import linked_files

    run = proxy_run(target, n, seed, sources)
    base = load_policy(None, protected="c").model_copy(update={"label": None}).model_dump()
    base["protected_file"] = {"join_on": "pid", "unmatched": "exclude", "max_unmatched_share": 0.15}
    if aux_seeds is not None:
        base["decision"] = {**base["decision"], "aux_seeds": aux_seeds}
    policy = Policy.model_validate(base)
    flagged = np.asarray(run["truth"]) > TAU
    out = []
    for u in shares:
        for pattern in patterns:
            audit, protected, missing = linked_files(run["frame"], "c", u, pattern, seed=2000 + seed,
                                                     truth=run["truth"], delta=TAU)
            start = time.perf_counter()
            result = check_linked_attributes(run["model"], audit, policy=policy, protected_rows=protected,
                                             feature_spec=run["spec"])
            wall = time.perf_counter() - start
            check = result.sections[0].check
            rule = {r["rule"]: r for r in result.rules}["max_flagged_fraction"]
            lo, hi = rule.get("bound") or (check.interval.lower, check.interval.upper)
            truth = float(flagged.mean())
            out.append({"target": target, "n": n, "seed": seed, "u": u, "pattern": pattern,
                        "unmatched": int(missing.sum()), "truth_all": truth,
                        "truth_matched": float(flagged[~missing].mean()), "flagged": check.flagged_fraction,
                        "read_lower": check.interval.lower, "read_upper": check.interval.upper,
                        "lower": float(lo), "upper": float(hi), "covered": bool(lo <= truth <= hi),
                        "decision": result.decision,
                        "not_ok": [r["rule"] for r in result.rules if r["status"] not in ("ok", "exceeded")],
                        "wall_s": round(wall, 1)})
    return out


def _bound(row: dict, prefix: str = "") -> str:
    """'[2.0%, 4.5%]': the bound over all rows, or with ``prefix`` "read_" the matched rows' interval."""
    return f"[{row[prefix + 'lower']:.1%}, {row[prefix + 'upper']:.1%}]"


def table(rows: list[dict]) -> str:
    """Markdown: one line per pattern, u and target, the seeds side by side."""
    out = ["| pattern | u | target | truth, all rows | truth, matched rows | matched rows' interval | "
           "matched interval covers matched truth | bound over all rows (per seed) | bound covers truth | decisions | right |",
           "|---|---:|---|---|---|---|---:|---|---:|---|---:|"]
    keys = sorted({(r["pattern"], r["u"], r["target"]) for r in rows},
                  key=lambda k: (PATTERNS.index(k[0]), k[1], k[2]))
    for pattern, u, target in keys:
        rs = sorted((r for r in rows if (r["pattern"], r["u"], r["target"]) == (pattern, u, target)),
                    key=lambda r: r["seed"])
        right = sum(1 for r in rs if r["decision"] == expected(r))
        out.append(f"| {pattern} | {u:.0%} | {target} | {', '.join(format(r['truth_all'], '.1%') for r in rs)} | "
                   f"{', '.join(format(r['truth_matched'], '.1%') for r in rs)} | "
                   f"{', '.join(_bound(r, 'read_') for r in rs)} | "
                   f"{sum(r['read_lower'] <= r['truth_matched'] <= r['read_upper'] for r in rs)}/{len(rs)} | "
                   f"{', '.join(_bound(r) for r in rs)} | "
                   f"{sum(r['covered'] for r in rs)}/{len(rs)} | {', '.join(r['decision'] for r in rs)} | "
                   f"{right}/{len(rs)} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--targets", default="unfair,fair")
    ap.add_argument("--shares", default=",".join(map(str, SHARES)))
    ap.add_argument("--patterns", default=",".join(PATTERNS))
    ap.add_argument("--aux-seeds", type=int, default=None, help="aux seeds per check (default: the policy's)")
    add_run_file_arguments(ap)
    args = ap.parse_args(argv)
    if args.table:
        print(table(read_runs(args.table)))
        return 0
    sources, rows = bundled_sources(args.data_dir), []
    for seed in map(int, args.seeds.split(",")):
        for target in args.targets.split(","):
            for row in runs(target, args.n, seed, sources, [float(v) for v in args.shares.split(",")],
                            args.patterns.split(","), args.aux_seeds):
                rows.append(row)
                verdict = expected(row)
                mark = "" if verdict is None else ("  right" if row["decision"] == verdict else "  WRONG")
                print(f"rows={row['n']} u={row['u']:.2f} pattern={row['pattern']:9s} seed={seed} {target:6s} "
                      f"truth(all)={row['truth_all']:6.1%} truth(matched)={row['truth_matched']:6.1%} "
                      f"read={row['flagged']:6.1%} [{row['read_lower']:.1%}, {row['read_upper']:.1%}] "
                      f"bound=[{row['lower']:.1%}, {row['upper']:.1%}] "
                      f"{'covers' if row['covered'] else 'MISSES'} {row['decision']}{mark} ({row['wall_s']} s) "
                      f"{' '.join(row['not_ok'])}", flush=True)
                append_run(args.out, row)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
