"""The per-person ranking at subtle label bias: AP against IFS > δ of the expected change, the ranking score,
FlipTest and the best baseline; the flagged fraction and the decision, which the ranking does not read.

Cells (``_cells.py``): proxy injection on real UCI Adult and law-school rows (binary and 3-class c, a 4-level
categorical proxy among the proxies) and the mechanisms family's ratio proxy on Bank Marketing rows (binary c, no
categorical proxy: the control whose order cannot change), label bias 0.15, 0.3 and 0.5. The shipped reading
(``coupled_matched``, declared admissible features) is run once per cell; its per-person outputs give

- ``expected``: E|Δŷ| over the level configurations (``LICResult.scores``),
- ``ranking``: :meth:`~faux_checks.method.result.LICResult.ranking_score` at δ (P(|Δŷ| > δ), ties by E|Δŷ|),
- ``ceiling``: the AP the ranking score would reach if each row's true configuration were drawn from the
  reading's own configuration weights (mean of 20 draws): what the level configurations leave unidentified.

Usage::

    python benchmarks/bench_ranking.py --seeds 3,4,5 --out benchmarks/runs/ranking.json
    python benchmarks/bench_ranking.py --table benchmarks/runs/ranking.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

DELTAS = (0.1, 0.05)
BIASES = (0.15, 0.3, 0.5)
CELLS = [("proxy", "adult", "binary"), ("proxy", "law", "binary"), ("proxy", "adult", "multiclass"),
         ("proxy", "law", "multiclass"), ("ratio", "bank", "binary")]
BASELINES = ("fta", "wfta", "unfair_map", "fliptest")


def self_consistent_ap(lic, delta: float, rng: np.random.Generator, draws: int = 20) -> float:
    """Mean AP of the ranking score against a truth drawn from the reading's own configuration weights."""
    from testers import average_precision

    if lic.outcomes is None:
        return float("nan")
    cw = np.cumsum(lic.outcome_weights, axis=1)
    rank, rows = lic.ranking_score(delta), np.arange(len(cw))
    out = []
    for _ in range(draws):
        k = (rng.random(len(cw))[:, None] > cw).sum(axis=1).clip(0, cw.shape[1] - 1)
        out.append(average_precision(rank, lic.outcomes[rows, k] > delta))
    return float(np.nanmean(out))


def one_cell(sources, family: str, dataset: str, kind: str, bias: float, seed: int) -> dict:
    import _cells
    import _readings
    from testers import average_precision, decide

    t0 = time.perf_counter()
    if family == "proxy":
        cell = _cells.proxy_cell(sources, dataset=dataset, kind=kind, bias=bias, seed=seed)
    else:
        cell = _cells.mechanism_cell(sources, dataset=dataset, mechanism=family, kind=kind, bias=bias, seed=seed)
    tester = _readings._tester(cell, cell.aux, admissible=cell.admissible,
                               options=_readings.SWAP_READINGS["coupled_matched"][1])
    lic = tester.evaluate(cell.X, cell.c, evidence=False)
    base = _readings.baseline_scores(cell)
    row = {"family": family, "dataset": dataset, "kind": kind, "bias": bias, "seed": seed, "n": len(cell.truth)}
    rng = np.random.default_rng(seed)
    for delta in DELTAS:
        pos = cell.truth > delta
        flagged = float(np.mean(lic.decision_weights(delta)))
        aps = {name: average_precision(s, pos) for name, s in base.items()}
        row[f"{delta:g}"] = {
            "share": float(pos.mean()), "flagged": flagged, "decision": decide(flagged, len(pos)),
            "expected": average_precision(lic.scores, pos), "ranking": average_precision(lic.ranking_score(delta), pos),
            "ceiling": self_consistent_ap(lic, delta, rng), **aps,
            "best_baseline": max((v for v in aps.values() if np.isfinite(v)), default=float("nan"))}
    row["seconds"] = time.perf_counter() - t0
    return row


def table(rows: list[dict], delta: str = "0.1") -> str:
    """Markdown: one line per cell and seed, then the means per bias."""
    head = ("| cell | bias | seed | true share | flagged | decision | AP expected change | AP ranking score | "
            "AP ceiling | AP FlipTest | AP best baseline |\n|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    lines = [head]
    fmt = lambda v: "–" if v is None or not np.isfinite(v) else f"{v:.3f}"   # noqa: E731
    for r in rows:
        m = r[delta]
        lines.append(f"| {r['dataset']} {r['family']}, {r['kind']} | {r['bias']:g} | {r['seed']} | {m['share']:.3f} | "
                     f"{m['flagged']:.3f} | {m['decision']} | {fmt(m['expected'])} | {fmt(m['ranking'])} | "
                     f"{fmt(m['ceiling'])} | {fmt(m.get('fliptest'))} | {fmt(m['best_baseline'])} |")
    lines += ["", "| cell | bias | seeds | mean AP expected change | mean AP ranking score | mean gain | min gain | "
              "mean AP FlipTest | mean AP best baseline |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    label = lambda r: f"{r['dataset']} {r['family']}, {r['kind']}"       # noqa: E731
    for name, b in sorted({(label(r), r["bias"]) for r in rows}, key=lambda k: (k[1], k[0])):
        sel = [r[delta] for r in rows if label(r) == name and r["bias"] == b]
        gain = np.array([m["ranking"] - m["expected"] for m in sel])
        ft = [m["fliptest"] for m in sel if "fliptest" in m]
        lines.append(f"| {name} | {b:g} | {len(sel)} | {np.nanmean([m['expected'] for m in sel]):.3f} | "
                     f"{np.nanmean([m['ranking'] for m in sel]):.3f} | {np.nanmean(gain):+.3f} | {np.nanmin(gain):+.3f} | "
                     f"{np.nanmean(ft) if ft else float('nan'):.3f} | {np.nanmean([m['best_baseline'] for m in sel]):.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="3,4,5")
    ap.add_argument("--biases", default=",".join(f"{b:g}" for b in BIASES))
    ap.add_argument("--cells", default=None, help="family:dataset:kind,... (default: the development cells; "
                    "proxy:credit:binary is the held-out check, never tuned on)")
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=None, help="JSON file the rows are appended to (one run per line)")
    ap.add_argument("--table", type=Path, default=None, help="print the markdown tables of a JSON file and exit")
    args = ap.parse_args(argv)
    if args.table:
        rows = [json.loads(line) for line in args.table.read_text().splitlines() if line.strip()]
        for delta in DELTAS:
            print(f"\nδ = {delta:g}\n\n" + table(rows, f"{delta:g}"))
        return 0
    import torch

    import _cells

    torch.set_num_threads(1)
    sources = _cells.Sources(args.data_dir)
    for seed in [int(s) for s in args.seeds.split(",")]:
        for bias in [float(b) for b in args.biases.split(",")]:
            for family, dataset, kind in (CELLS if args.cells is None else
                                          [tuple(c.split(":")) for c in args.cells.split(",")]):
                row = one_cell(sources, family, dataset, kind, bias, seed)
                m = row["0.1"]
                print(f"{dataset} {family} {kind} bias {bias:g} seed {seed}: share {m['share']:.3f} flagged "
                      f"{m['flagged']:.3f} AP {m['expected']:.3f} -> {m['ranking']:.3f} ({row['seconds']:.0f} s)",
                      flush=True)
                if args.out:
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
