"""The protected attribute given only as calibrated probabilities: decisions and coverage per sharpness level.

Cases: the ``proxy`` family of ``bench_small_data.py`` (Adult rows, an injected binary c with four proxies, 14% of the
audited rows in group 1; ``fair``: an MLP of the real block only, truth 0; ``unfair``: every column, label bias 0.8),
its true share of people moving by more than δ = 0.1 known exactly. The check gets, instead of c, calibrated
probabilities at ROC-AUC ``--levels`` against c (:mod:`faux_checks.groundtruth.estimated`) and runs
:func:`faux_checks.gate.estimated.check_estimated` with the shipped policy plus ``[protected_probabilities]``; the
``known`` line is the same check with c itself (:func:`faux_checks.gate.attributes.check_attributes`). The rule is in
``benchmarks/benchmark_notes.md`` ("Estimated protected attribute"); the table goes to docs/benchmark.md.

Usage::

    python benchmarks/bench_estimated.py --n 2000 --seeds 0,1,2 --out benchmarks/runs/estimated.json
    python benchmarks/bench_estimated.py --table benchmarks/runs/estimated.json

Every line printed: rows, sharpness (target and measured expected ROC-AUC), truth, read, interval, decision.
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
LEVELS = (0.95, 0.8, 0.9, 0.7)          # the decisive contrast first: a run cut short still has it


def expected(row: dict, min_sharpness: float) -> str | None:
    """The rule's verdict: failed for a clearly unfair target (truth ≥ 10%); not passed for any other target over the
    policy's 5%; for a fair control (truth ≤ 1%) passed
    where the probabilities are sharp enough (measured expected ROC-AUC ≥ min_sharpness, or c known), else undecided."""
    if row["target"].startswith("unfair") and row["true_share"] >= 0.10:
        return "failed"
    if row["true_share"] > 0.05:            # over the policy threshold: any decision but a pass
        return "not passed"
    if row["target"].startswith("fair") and row["true_share"] <= 0.01:
        sharp = row["level"] == "known" or row["sharpness"] >= min_sharpness
        return "passed" if sharp else "undecided"
    return None


def _row(run: dict, level, result, wall: float, sharpness: float) -> dict:
    check = result.sections[0].check
    iv = check.interval
    truth = float(np.mean(run["truth"] > TAU))
    rule = next((r for r in result.rules if r["rule"] == "max_flagged_fraction"), {})
    lo, hi = (iv.lower, iv.upper) if iv is not None else (float("nan"), float("nan"))
    return {"level": level, "sharpness": sharpness, "true_share": truth, "flagged": check.flagged_fraction,
            "lower": lo, "upper": hi, "covered": bool(lo <= truth <= hi), "decision": result.decision,
            "draws": list(getattr(iv, "draws", ()) or ()), "between": getattr(iv, "between", None),
            "not_ok": [r["rule"] for r in result.rules if r["status"] not in ("ok", "exceeded")],
            "aux_quality": check.aux_quality, "wall_s": round(wall, 1), "pass_delta": rule.get("pass_delta"),
            "pass_fraction": rule.get("pass_fraction"), "pass_bound": rule.get("pass_bound")}


def strong_proxy_run(target: str, n: int, seed: int, sources, scale: float) -> dict:
    """``bench_small_data.proxy_run`` with every proxy strength times ``scale`` (c shows more in the features)."""
    import bench_small_data
    from faux_checks.groundtruth import proxy

    original = proxy.make_proxy_data

    def stronger(*args, **kwargs):
        return original(*args, **kwargs, strength={k: v * scale for k, v in proxy.DEFAULT_STRENGTH.items()})
    proxy.make_proxy_data = stronger
    try:
        return bench_small_data.proxy_run(target, n, seed, sources)
    finally:
        proxy.make_proxy_data = original


def informed_audit(run: dict, target: str, n: int, seed: int, sources, level: float):
    """The audit rows with P(c = 1 | x, s) (:func:`faux_checks.groundtruth.estimated.informed_probabilities`): the
    proxy run's audit ProxyData rebuilt as ``bench_small_data.proxy_run`` builds it (same seeds, same rows)."""
    from bench_small_data import MINORITY, PROXY_BIAS, _audit_rows

    from faux_checks.groundtruth.estimated import informed_probabilities
    from faux_checks.groundtruth.proxy import make_proxy_data

    legit, y, legit_column = sources.legit("adult")
    rows = np.random.default_rng(seed).choice(len(legit), 8000 + 12_000, replace=False)
    data = make_proxy_data(legit.iloc[rows], y[rows], legit_column=legit_column, kind="binary",
                           bias=PROXY_BIAS[target], seed=seed)
    pool = data.subset(np.arange(8000, len(rows)))
    audit = pool.subset(_audit_rows(pool.c, n, seed))
    assert (audit.c == np.asarray(run["c"])).all()
    p = informed_probabilities(audit, level, seed=1000 + seed, share=MINORITY, z_pool=data.legit_latent)
    return run["frame"].drop(columns=["c"]).assign(p_g0=1.0 - p, p_g1=p)


def runs(target: str, n: int, seed: int, sources, levels, draws: int, aux_seeds: int | None,
         known_line: bool = True, scale: float = 1.0, informed: bool = False) -> list[dict]:
    """One target and seed: the known-c check (``known_line``), then the estimated check at every level."""
    from bench_small_data import proxy_run

    from faux_checks import load_policy
    from faux_checks.gate.attributes import check_attributes
    from faux_checks.gate.estimated import check_estimated
    from faux_checks.gate.policy import Policy
    from faux_checks.groundtruth.estimated import estimated_audit
    from faux_checks.inputs.probabilities import expected_auc

    run = proxy_run(target, n, seed, sources) if scale == 1.0 else strong_proxy_run(target, n, seed, sources, scale)
    known = load_policy(None, protected="c").model_copy(update={"label": None})
    frame = run["frame"].assign(c=np.where(np.asarray(run["c"]) == 1, "g1", "g0"))
    out = []
    if known_line:
        start = time.perf_counter()
        result = check_attributes(run["model"], frame, policy=known, feature_spec=run["spec"])
        out.append(_row(run, "known", result, time.perf_counter() - start, 1.0))
    section = {"column": "c", "groups": {"g0": "p_g0", "g1": "p_g1"}, "draws": draws}
    payload = {**known.model_dump(), "protected_probabilities": section}
    if aux_seeds is not None:               # each draw trains its own aux model: the draws' spread holds the seeds'
        payload["decision"] = {**payload["decision"], "aux_seeds": aux_seeds}
    policy = Policy.model_validate(payload)
    for level in levels:
        audit = (informed_audit(run, target, n, seed, sources, level) if informed
                 else estimated_audit(run["frame"], "c", level, seed=1000 + seed))
        sharpness = expected_auc(audit[["p_g0", "p_g1"]].to_numpy())
        start = time.perf_counter()
        result = check_estimated(run["model"], audit, policy=policy, feature_spec=run["spec"])
        out.append(_row(run, level, result, time.perf_counter() - start, sharpness))
    name = target if scale == 1.0 else f"{target} (proxies x{scale:g})"
    name = f"{name}, p given x" if informed else name
    return [{"target": name, "n": n, "seed": seed, "min_sharpness": policy.protected_probabilities.min_sharpness,
             **r} for r in out]


def _read(row: dict) -> str:
    """'3.1% [2.0%, 4.5%]'."""
    return f"{row['flagged']:.1%} [{row['lower']:.1%}, {row['upper']:.1%}]"


def right(row: dict) -> bool:
    """Whether the decision is :func:`expected`'s verdict (``not passed``: failed or undecided)."""
    verdict = expected(row, row["min_sharpness"])
    return row["decision"] != "passed" if verdict == "not passed" else row["decision"] == verdict


def _read_pass(row: dict) -> str:
    """'9.8% [7.0%, 12.6%] at 0.056' (the pass reading at δ·λ), or '—' when not recorded."""
    if row.get("pass_fraction") is None or row.get("pass_bound") is None:
        return "—"
    lo, hi = row["pass_bound"]
    return f"{row['pass_fraction']:.1%} [{lo:.1%}, {hi:.1%}] at {row['pass_delta']:.3f}"


def table(rows: list[dict]) -> str:
    """Markdown: one line per rows, sharpness level and target, the seeds side by side."""
    out = ["| rows | level (ROC-AUC of p) | measured sharpness | target | true share | read (per seed) | "
           "read at δ·λ (per seed) | intervals cover truth | decisions | right |",
           "|---:|---|---|---|---|---|---|---:|---|---:|"]
    order = ["known"] + sorted({r["level"] for r in rows if r["level"] != "known"}, reverse=True)
    keys = sorted({(r["n"], r["level"], r["target"]) for r in rows}, key=lambda k: (k[0], order.index(k[1]), k[2]))
    for n, level, target in keys:
        rs = sorted((r for r in rows if (r["n"], r["level"], r["target"]) == (n, level, target)), key=lambda r: r["seed"])
        n_right = sum(1 for r in rs if right(r))
        out.append(f"| {n:,} | {level} | {', '.join(format(r['sharpness'], '.3f') for r in rs)} | {target} | "
                   f"{', '.join(format(r['true_share'], '.1%') for r in rs)} | "
                   f"{', '.join(_read(r) for r in rs)} | {', '.join(_read_pass(r) for r in rs)} | "
                   f"{sum(r['covered'] for r in rs)}/{len(rs)} | {', '.join(r['decision'] for r in rs)} | "
                   f"{n_right}/{len(rs)} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="2000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--targets", default="fair,unfair")
    ap.add_argument("--levels", default=",".join(map(str, LEVELS)))
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--strength-scale", type=float, default=1.0, help="every proxy strength times this")
    ap.add_argument("--informed", action="store_true", help="probabilities calibrated given the features too")
    ap.add_argument("--no-known", action="store_true", help="skip the check with c itself")
    ap.add_argument("--aux-seeds", type=int, default=1, help="aux seeds per draw (the known line: the policy's)")
    add_run_file_arguments(ap)
    args = ap.parse_args(argv)
    if args.table:
        print(table(read_runs(args.table)))
        return 0
    sources, rows = bundled_sources(args.data_dir), []
    for n in map(int, args.n.split(",")):
        for seed in map(int, args.seeds.split(",")):
            for target in args.targets.split(","):
                for row in runs(target, n, seed, sources, [float(v) for v in args.levels.split(",")], args.draws,
                                args.aux_seeds, not args.no_known, args.strength_scale, args.informed):
                    rows.append(row)
                    verdict = expected(row, row["min_sharpness"])
                    mark = "" if verdict is None else ("  right" if right(row) else "  WRONG")
                    print(f"rows={n:5d} seed={seed} {target:6s} sharpness={row['level']!s:5s} "
                          f"(measured {row['sharpness']:.3f}) truth={row['true_share']:6.1%} "
                          f"read={row['flagged']:6.1%} [{row['lower']:.1%}, {row['upper']:.1%}] "
                          f"at δλ: {_read_pass(row)} {row['decision']}{mark} ({row['wall_s']} s) {' '.join(row['not_ok'])}",
                          flush=True)
                    append_run(args.out, row)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
