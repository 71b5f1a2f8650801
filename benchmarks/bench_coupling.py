"""A 60-level categorical proxy under two generating couplings: the gate's readings, the bounds and its decision.

Each run draws the zip-code-like family (:mod:`faux_checks.groundtruth.zipcode`) on bundled UCI Adult rows
(``age``, ``education-num``, ``hours-per-week``), the level generated under the inverse-CDF or the Gumbel-max
coupling, trains an MLP target, audits ``n`` rows with the shipped default policy (``protected = "c"``) through
:func:`faux_checks.gate.one_attribute.check_one_attribute`, and prints the truth (share of people whose exact
counterfactual change exceeds δ = 0.1), the flagged fraction under each coupling the gate reads (rule ``level_coupling``), the Fréchet bounds
over every coupling, and the decision.

Targets: ``fair``: an MLP of the real block only, trained on the real income label (truth 0); ``unfair``: an MLP of
every column trained on labels drawn from a logit that reads the level's place (redlining along the line).

Usage::

    python benchmarks/bench_coupling.py --n 3000 --seeds 0,1,2 --out benchmarks/runs/coupling.json
    python benchmarks/bench_coupling.py --table benchmarks/runs/coupling.json
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
GENERATORS = ("inverse_cdf", "gumbel")
REAL = ["age", "education-num", "hours-per-week"]
N_TRAIN = 8000


def income_logit(frame) -> np.ndarray:
    """The unfair labels' logit from the real block (income-like: older, more educated, longer hours)."""
    return (0.03 * (frame["age"].to_numpy(float) - 38) + 0.35 * (frame["education-num"].to_numpy(float) - 10)
            + 0.03 * (frame["hours-per-week"].to_numpy(float) - 40) - 0.5)


def build(generator: str, target: str, n: int, seed: int, redlining: float | None = None) -> dict:
    """One cell's data, target and truth: ``model`` (an MLP of the encoded rows), ``spec``, ``frame`` (the audited
    rows with ``c``), ``truth`` (n,) exact IFS, ``c`` (n,), ``X_train`` and ``c_train`` (the training rows, encoded)."""
    from _cells import MaskedInputs, prob, train_mlp

    from faux_checks import FeatureSpec
    from faux_checks.groundtruth.zipcode import make_zip_data, zip_fairness_scores, zip_unfair_logit
    from faux_checks.inputs.datasets import load_adult

    adult = load_adult()
    rows = np.random.default_rng(seed).choice(len(adult), N_TRAIN + n, replace=False)
    base = adult.iloc[rows][REAL].astype(float)
    income = adult["income"].to_numpy()[rows]
    data = make_zip_data(base, coupling=generator, seed=seed)
    train, audit = data.subset(np.arange(N_TRAIN)), data.subset(np.arange(N_TRAIN, N_TRAIN + n))
    frame = train.frame()
    spec = FeatureSpec.fit(frame, list(frame.columns), min_frequency=1)
    X_train = spec.encode(frame)
    if target == "fair":
        real = np.isin(spec.feature_to_column(), [spec.source_columns.index(c) for c in REAL])
        net = MaskedInputs(train_mlp(X_train[:, real], income[:N_TRAIN], seed=seed), real)
    else:
        logit = zip_unfair_logit(frame, income_logit(frame), **({} if redlining is None else {"redlining": redlining}))
        y = (np.random.default_rng(50 + seed).random(N_TRAIN) < 1 / (1 + np.exp(-logit))).astype(int)
        net = train_mlp(X_train, y, seed=seed)
    truth = zip_fairness_scores(lambda f: prob(net, spec.encode(f)), audit)
    return {"model": net, "spec": spec, "frame": audit.frame().assign(c=audit.protected()), "truth": truth,
            "c": audit.c, "X_train": X_train, "c_train": train.c}


def coupling_record(result) -> dict:
    """The gate's coupling readings of a check: ``readings`` per coupling, ``used``, the Fréchet ``bounds`` of the
    flagged fraction and of the change level, and the ``coupling_rule`` (status and detail; None without one)."""
    couplings = result.provenance.get("couplings") or {}
    rule = next((r for r in result.rules if r["rule"] == "level_coupling"), None)
    bounds = couplings.get("bounds") or {}
    return {"readings": couplings.get("readings"), "used": couplings.get("used"),
            "bounds": [bounds.get("flagged_lower"), bounds.get("flagged_upper")],
            "change_bounds": [bounds.get("change_lower"), bounds.get("change_upper")],
            "coupling_rule": None if rule is None else {"status": rule["status"], "detail": rule["detail"]}}


def run(generator: str, target: str, n: int, seed: int, redlining: float | None = None) -> dict:
    """One cell: data, target, truth, the gate's check; a JSON-ready row."""
    from faux_checks import load_policy
    from faux_checks.gate.one_attribute import check_one_attribute

    cell = build(generator, target, n, seed, redlining)
    policy = load_policy(None, protected="c").model_copy(update={"label": None})
    start = time.perf_counter()
    result = check_one_attribute(cell["model"], cell["frame"], policy=policy, feature_spec=cell["spec"])
    wall = time.perf_counter() - start
    return {
        "generator": generator, "target": target, "n": n, "seed": seed, "redlining": redlining,
        "true_share": float(np.mean(cell["truth"] > TAU)),
        "flagged": result.flagged_fraction, "lower": result.interval.lower, "upper": result.interval.upper,
        **coupling_record(result), "decision": result.decision, "aux_quality": result.aux_quality,
        "not_ok": [r["rule"] for r in result.rules if r["status"] != "ok"], "wall_s": round(wall, 1),
    }


def expected(row: dict) -> str | None:
    """"failed" for a clearly unfair target (truth ≥ 10%), "passed" for a fair control (truth ≤ 1%)."""
    if row["target"] == "unfair" and row["true_share"] >= 0.10:
        return "failed"
    if row["target"] == "fair" and row["true_share"] <= 0.01:
        return "passed"
    return None


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def table(rows: list[dict]) -> str:
    """The markdown table of docs/benchmark.md: one line per cell."""
    out = ["| generator | target | seed | true share | comonotone | Gumbel-max | Fréchet bounds | change level | "
           "decision | robust |", "|---|---|---:|---:|---:|---:|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (GENERATORS.index(r["generator"]), r["target"], r["seed"])):
        rd = r.get("readings") or {}
        rule = r.get("coupling_rule") or {}
        robust = rule.get("detail", "").split(":")[0] if rule else "n/a"
        out.append(f"| {r['generator']} | {r['target']} | {r['seed']} | {r['true_share']:.1%} | "
                   f"{_pct(rd.get('comonotone'))} | {_pct(rd.get('gumbel'))} | {_pct(r['bounds'][0])}–"
                   f"{_pct(r['bounds'][1])} | {_pct(r['change_bounds'][0])}–{_pct(r['change_bounds'][1])} | "
                   f"{r['decision']} | {robust} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--generators", default=",".join(GENERATORS))
    ap.add_argument("--targets", default="fair,unfair")
    ap.add_argument("--redlining", type=float, default=None, help="the unfair labels' logit per unit of place "
                    "(default: faux_checks.groundtruth.zipcode.REDLINING)")
    add_run_file_arguments(ap, data_dir=False)
    args = ap.parse_args(argv)
    if args.table:
        print(table(read_runs(args.table)))
        return 0
    import torch

    torch.set_num_threads(1)
    rows = []
    for gen in args.generators.split(","):
        for tgt in args.targets.split(","):
            for seed in map(int, args.seeds.split(",")):
                row = run(gen, tgt, args.n, seed, args.redlining)
                rows.append(row)
                verdict = expected(row)
                mark = "" if verdict is None else ("  right" if row["decision"] == verdict else "  WRONG")
                rd = row["readings"] or {}
                print(f"{gen:11s} {tgt:6s} seed={seed} truth={row['true_share']:6.1%} "
                      f"flagged={row['flagged']:6.1%} [{row['lower']:.1%}, {row['upper']:.1%}] "
                      f"comonotone={_pct(rd.get('comonotone'))} gumbel={_pct(rd.get('gumbel'))} "
                      f"bounds={_pct(row['bounds'][0])}–{_pct(row['bounds'][1])} aux={row['aux_quality']:.3f} "
                      f"{row['decision']}{mark} ({row['wall_s']} s) {' '.join(row['not_ok'])}", flush=True)
                append_run(args.out, row)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
