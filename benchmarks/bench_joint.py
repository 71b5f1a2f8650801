"""Joint-only proxies: c readable only from a pair of columns, each distributed alike in every group.

Cases: :mod:`faux_checks.groundtruth.joint` on Adult rows (``age``, ``education-num``, ``hours-per-week``: what c does
not cause), a binary c drawn independently of them (the generator's 50% in group 1), and the pair (``joint_a``,
``joint_b``) of one construction (``sign``, ``ratio``, ``xor``; a share ``flip`` = 0.1 of rows reads the other
group). Two targets, each a fixed logit in the data's own units (nothing is trained, so the truth is exact for every
person): ``unfair`` reads the pair's interaction (:func:`~faux_checks.groundtruth.joint.joint_unfair_logit`) plus
0.8·(education − 10)/2.5; ``fair`` reads the education term only (truth 0). The check is
:func:`faux_checks.gate.one_attribute.check_one_attribute` with the shipped policy plus ``protected = "c"`` (no
label). The rule is in ``benchmarks/benchmark_notes.md`` ("Joint-only proxies"); the table goes to docs/benchmark.md.

Usage::

    python benchmarks/bench_joint.py --n 2000,5000 --seeds 0,1,2 --out benchmarks/runs/joint.json
    python benchmarks/bench_joint.py --table benchmarks/runs/joint.json [--compare benchmarks/runs/joint_linear_move.json]

Every line printed: construction, target, n, seed, truth (share of IFS > 0.1), flagged [interval], calibrated (the
truth within the interval widened by 2 points), decision, the columns released from the hold, the rules not ok.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runfile import add_run_file_arguments, append_run, read_runs  # noqa: E402  (benchmarks/ on the path)

TAU = 0.1
BASE = ("age", "education-num", "hours-per-week")
CONSTRUCTIONS = ("sign", "ratio", "xor")
TARGETS = ("unfair", "fair")


def _target(spec, construction: str, unfair: bool):
    """A torch logit on the encoded features, read in the data's own units (the family's target or fair control)."""
    import torch

    class Target(torch.nn.Module):
        def forward(self, x):
            cols = {c.name: x[:, i] * (c.std or 1.0) + c.mean for i, c in enumerate(spec.columns)}
            z = 0.8 * (cols["education-num"] - 10.0) / 2.5
            if unfair:
                a, b = cols["joint_a"], cols["joint_b"]
                if construction == "sign":
                    z = z + 2.5 * torch.tanh(a * b)
                elif construction == "ratio":
                    z = z + 2.5 - 2.5 * torch.abs(torch.log(b.clamp_min(1e-6)) - torch.log(a.clamp_min(1e-6)))
                else:
                    z = z + 2.5 * (2.0 * torch.abs(a - b) - 1.0)
            return z[:, None]
    return Target().eval()


def case(construction: str, target: str, n: int, seed: int):
    """The audit frame (with c), the target, its spec and the exact truth (n,) of one cell."""
    import torch

    from faux_checks import FeatureSpec
    from faux_checks.groundtruth.joint import (joint_fair_logit, joint_fairness_scores, joint_unfair_logit,
                                               make_joint_data)
    from faux_checks.inputs.datasets import load_adult

    adult = load_adult()
    rows = np.random.default_rng(seed).choice(len(adult), n, replace=False)
    data = make_joint_data(adult.iloc[rows][list(BASE)], construction=construction, seed=seed)
    frame = data.frame()
    spec = FeatureSpec.fit(frame, list(frame.columns))
    model = _target(spec, construction, target == "unfair")

    def predict(f):
        with torch.no_grad():
            return torch.sigmoid(model(torch.as_tensor(spec.encode(f), dtype=torch.float32))[:, 0]).numpy()
    edu = 0.8 * (frame["education-num"].to_numpy(np.float64) - 10.0) / 2.5
    logit = joint_unfair_logit(frame, construction, edu) if target == "unfair" else joint_fair_logit(frame, edu)
    np.testing.assert_allclose(predict(frame), 1 / (1 + np.exp(-logit)), atol=1e-4)   # the target is the family's
    return frame.assign(c=data.protected()), model, spec, joint_fairness_scores(predict, data), data


def one(construction: str, target: str, n: int, seed: int, aux_seeds: int | None) -> dict:
    """Check one cell with the shipped policy and return one JSON-ready row."""
    from faux_checks import load_policy
    from faux_checks.gate.one_attribute import check_one_attribute

    frame, model, spec, truth, data = case(construction, target, n, seed)
    policy = load_policy(None, protected="c").model_copy(update={"label": None})
    if aux_seeds is not None:
        policy = policy.model_copy(update={"decision": policy.decision.model_copy(update={"aux_seeds": aux_seeds})})
    start = time.perf_counter()
    result = check_one_attribute(model, frame, policy=policy, feature_spec=spec)
    wall = time.perf_counter() - start
    lo, hi = result.interval.lower, result.interval.upper
    share = float(np.mean(truth > TAU))
    block = next((r for r in result.rules if r["rule"] == "held_jointly_free"), {})
    return {"construction": construction, "target": target, "n": n, "seed": seed,
            "minority_rows": int((data.c == 1).sum()), "true_share": share, "flagged": result.flagged_fraction,
            "lower": lo, "upper": hi, "calibrated": bool(lo - 0.02 <= share <= hi + 0.02),
            "decision": result.decision, "aux_quality": result.aux_quality,
            "held_block": block.get("detail"),
            "not_ok": [r["rule"] for r in result.rules if r["status"] not in ("ok", "exceeded")],
            "undecided_reasons": [r["detail"] for r in result.rules if r["status"] not in ("ok", "exceeded")],
            "wall_s": round(wall, 1)}


def expected(row: dict) -> str | None:
    """The rule's verdict: a clearly unfair target (truth ≥ 10%) fails; a fair control (truth ≤ 1%) passes (undecided
    with a reason is allowed, failed never is); None in between."""
    if row["true_share"] >= 0.10:
        return "failed"
    if row["true_share"] <= 0.01:
        return "passed"
    return None


def right(row: dict) -> bool:
    """Whether the decision meets the rule (a fair control undecided with a reason counts as met)."""
    verdict = expected(row)
    if verdict == "passed" and row["decision"] == "undecided":
        return bool(row["undecided_reasons"])
    return verdict is None or row["decision"] == verdict


def table(rows: list[dict], compare: list[dict] | None = None) -> str:
    """Markdown: one line per construction, target, seed and n; with ``compare`` (another run file of the same
    cells), its flagged fraction beside."""
    other = {(r["construction"], r["target"], r["n"], r["seed"]): r for r in compare or ()}
    extra = " | flagged, compared run" if compare else ""
    out = [f"| construction | target | seed | n | truth | flagged [interval]{extra} | calibrated ±2 pts | decision | right |",
           "|---|---|---:|---:|---:|---|" + ("---:|" if compare else "") + "---|---|---|"]
    keys = sorted({(r["construction"], r["target"], r["seed"], r["n"]) for r in rows},
                  key=lambda k: (CONSTRUCTIONS.index(k[0]), TARGETS.index(k[1]), k[2], k[3]))
    for construction, target, seed, n in keys:
        (r,) = [r for r in rows if (r["construction"], r["target"], r["seed"], r["n"]) == (construction, target, seed, n)]
        was = other.get((construction, target, n, seed))
        shown = (f" | {was['flagged']:.1%}" if was else " | –") if compare else ""
        out.append(f"| {construction} | {target} | {seed} | {n:,} | {r['true_share']:.1%} | "
                   f"{r['flagged']:.1%} [{r['lower']:.1%}, {r['upper']:.1%}]{shown} | "
                   f"{'yes' if r['calibrated'] else 'no'} | {r['decision']} | {'yes' if right(r) else 'NO'} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="2000,5000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--constructions", default=",".join(CONSTRUCTIONS))
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--aux-seeds", type=int, default=None, help="aux seeds per check (default: the policy's)")
    ap.add_argument("--compare", type=Path, default=None, help="with --table: another run file's flagged fraction beside")
    add_run_file_arguments(ap, data_dir=False)
    args = ap.parse_args(argv)
    if args.table:
        print(table(read_runs(args.table), read_runs(args.compare) if args.compare else None))
        return 0
    import torch

    torch.set_num_threads(1)
    rows = []
    for n in map(int, args.n.split(",")):
        for seed in map(int, args.seeds.split(",")):
            for construction in args.constructions.split(","):
                for target in args.targets.split(","):
                    row = one(construction, target, n, seed, args.aux_seeds)
                    rows.append(row)
                    mark = "" if expected(row) is None else ("  right" if right(row) else "  WRONG")
                    print(f"{construction:5s} {target:6s} n={n} seed={seed} truth={row['true_share']:6.1%} "
                          f"read={row['flagged']:6.1%} [{row['lower']:.1%}, {row['upper']:.1%}] "
                          f"{'calibrated' if row['calibrated'] else 'OFF'} {row['decision']}{mark} "
                          f"({row['wall_s']} s) {' '.join(row['not_ok'])} | {row['held_block']}", flush=True)
                    append_run(args.out, row)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
