"""Decisions at the sizes lending teams audit: n = 1,000, 2,000 and 5,000 rows with a 10–15% protected minority.

Each run trains a target on a generator with a known individual-fairness truth, audits ``n`` rows of which about 14%
are the protected group, and runs the gate's in-memory check (:func:`faux_checks.gate.one_attribute.check_one_attribute`) with the shipped default
policy plus ``protected`` (and the family's declared admissible columns where the family has them). The selection rule
and the families are in ``benchmarks/benchmark_notes.md`` ("Small audits"); the table goes to docs/benchmark.md.

Families (targets):

- ``lending``: :mod:`faux_checks.groundtruth.lending` (synthetic applications, a yes/no adverse label, missing
  ``employment_years``), a scikit-learn Pipeline (HistGradientBoosting); ``fair``: blind to the two proxies, trained on
  unbiased labels (truth 0); ``unfair``: every column, labels with historical bias 0.3.
- ``proxy`` (Adult rows, :mod:`faux_checks.groundtruth.proxy`): four injected proxies (one built from a legitimate
  feature); ``fair``: an MLP of the real block only (truth 0); ``unfair``: every column, label bias 0.8.
- ``ratio`` (bank rows, :mod:`faux_checks.groundtruth.mechanisms`): a proxy built multiplicatively from a legitimate
  feature; ``fair``: an MLP of the real block only; ``unfair``: every column, label bias 1.0.
- ``mediator`` (bank rows): an admissible mediator (declared) and a proxy; ``fair``: the real block and the mediator
  only (truth 0); ``unfair``: every column, label bias 1.0.

Usage::

    python benchmarks/bench_small_data.py --n 1000,2000,5000 --seeds 0,1,2 --out benchmarks/runs/small_data.json
    python benchmarks/bench_small_data.py --table benchmarks/runs/small_data.json

Every line printed names the family, target, n, seed, the audited rows per group, the truth and the decision.
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

MINORITY = 0.14
TAU = 0.1
FAMILIES = ("lending", "proxy", "ratio", "mediator")


def _audit_rows(c: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Indices of ``n`` rows with round(MINORITY·n) from group 1 and the rest from group 0 (seeded)."""
    rng = np.random.default_rng(10_000 + seed)
    k = int(round(MINORITY * n))
    ones, zeros = np.flatnonzero(c == 1), np.flatnonzero(c == 0)
    if len(ones) < k or len(zeros) < n - k:
        raise ValueError(f"not enough rows for n={n}: {len(ones)} in group 1, {len(zeros)} in group 0")
    return np.sort(np.concatenate([rng.choice(ones, k, replace=False), rng.choice(zeros, n - k, replace=False)]))


def lending_run(target: str, n: int, seed: int) -> dict:
    """One lending run: the Pipeline, the audit frame, its truth and the policy overrides."""
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import Pipeline

    from faux_checks.groundtruth.lending import (LENDING_FEATURES, LENDING_PROXIES, lending_fairness_scores,
                                                 make_lending_data)

    bias = 0.0 if target == "fair" else 0.3
    cols = list(LENDING_FEATURES) if target == "fair" else list(LENDING_FEATURES + LENDING_PROXIES)
    train = make_lending_data(6000, label_bias=bias, strength=0.35, seed=100 + seed)
    audit = make_lending_data(n, label_bias=bias, strength=0.35, minority_share=MINORITY, seed=seed)
    model = Pipeline([("prep", ColumnTransformer([("num", "passthrough", cols)])),
                      ("clf", HistGradientBoostingClassifier(max_iter=100, min_samples_leaf=40, learning_rate=0.08,
                                                             random_state=seed))])
    model.fit(train.frame[cols], train.frame["deny"] == "yes")
    truth = lending_fairness_scores(audit, lambda f: model.predict_proba(f[cols])[:, 1])
    return {"model": model, "frame": audit.frame, "spec": None, "truth": truth, "c": audit.c,
            "policy": {"protected": "race", "label": "deny", "positive_label": "yes"}}


def mechanism_run(family: str, target: str, n: int, seed: int, sources) -> dict:
    """One mechanisms run on bank rows: an MLP, the audit frame (with ``c``), its truth and the policy overrides."""
    from _cells import MECHANISM_COLUMNS, MaskedInputs, prob, train_mlp

    from faux_checks import FeatureSpec
    from faux_checks.groundtruth.mechanisms import make_mechanism_data, mechanism_fairness_scores

    base, y, _ = sources.base("bank")
    n_train = 8000
    rows = np.random.default_rng(seed).choice(len(base), n_train + 12_000, replace=False)
    bias = 0.0 if target == "fair" else 1.0
    data = make_mechanism_data(base.iloc[rows], y[rows], mechanism=family, kind="binary", bias=bias, seed=seed,
                               **MECHANISM_COLUMNS.get(("bank", family), {}))
    train, pool = data.subset(np.arange(n_train)), data.subset(np.arange(n_train, len(rows)))
    audit = pool.subset(_audit_rows(pool.c, n, seed))
    frame = train.frame()
    columns = list(frame.columns)
    if family == "mediator" and target == "fair":
        columns = [c for c in columns if c in data.admissible]
    spec = FeatureSpec.fit(frame, columns, min_frequency=50)
    X_train = spec.encode(frame)
    if family == "ratio" and target == "fair":
        real = np.isin(spec.feature_to_column(), [spec.source_columns.index(c) for c in base.columns
                                                   if c in spec.source_columns])
        net = MaskedInputs(train_mlp(X_train[:, real], train.y, seed=seed), real)
    else:
        net = train_mlp(X_train, train.y, seed=seed)
    truth = mechanism_fairness_scores(lambda f: prob(net, spec.encode(f)), audit)
    audit_frame = audit.frame().assign(c=audit.c)
    declared = ["mediator"] if family == "mediator" else []
    return {"model": net, "frame": audit_frame, "spec": spec, "truth": truth, "c": audit.c,
            "policy": {"protected": "c", "label": None, "admissible": declared}}


#: Label bias of the proxy family per target (``moderate``: every column, a smaller bias; truth between the policy's
#: max_flagged_fraction and the unfair target's; ``mild``: the same with doubled proxy strengths).
PROXY_BIAS = {"fair": 0.0, "mild": 0.12, "moderate": 0.3, "unfair": 0.8}


def proxy_run(target: str, n: int, seed: int, sources) -> dict:
    """One proxy-injection run on Adult rows: an MLP, the audit frame (with ``c``), its truth and the overrides."""
    from _cells import MaskedInputs, prob, train_mlp

    from faux_checks import FeatureSpec
    from faux_checks.groundtruth.proxy import PROXY_COLUMNS, make_proxy_data, proxy_fairness_scores

    legit, y, legit_column = sources.legit("adult")
    n_train = 8000
    rows = np.random.default_rng(seed).choice(len(legit), n_train + 12_000, replace=False)
    bias = PROXY_BIAS[target]
    data = make_proxy_data(legit.iloc[rows], y[rows], legit_column=legit_column, kind="binary", bias=bias, seed=seed)
    train, pool = data.subset(np.arange(n_train)), data.subset(np.arange(n_train, len(rows)))
    audit = pool.subset(_audit_rows(pool.c, n, seed))
    frame = train.frame()
    spec = FeatureSpec.fit(frame, list(frame.columns), min_frequency=50)
    X_train = spec.encode(frame)
    if target == "fair":
        real = ~np.isin(spec.feature_to_column(), [spec.source_columns.index(p) for p in PROXY_COLUMNS])
        net = MaskedInputs(train_mlp(X_train[:, real], train.y, seed=seed), real)
    else:
        net = train_mlp(X_train, train.y, seed=seed)
    truth = proxy_fairness_scores(lambda f: prob(net, spec.encode(f)), audit)
    return {"model": net, "frame": audit.frame().assign(c=audit.c), "spec": spec, "truth": truth, "c": audit.c,
            "policy": {"protected": "c", "label": None}}


def one(family: str, target: str, n: int, seed: int, sources) -> dict:
    """Build the run, check it with the shipped policy, and return one JSON-ready row."""
    from faux_checks import load_policy
    from faux_checks.gate.one_attribute import check_one_attribute

    if family == "lending":
        run = lending_run(target, n, seed)
    elif family == "proxy":
        run = proxy_run(target, n, seed, sources)
    else:
        run = mechanism_run(family, target, n, seed, sources)
    overrides = dict(run["policy"])
    admissible = overrides.pop("admissible", [])
    unset = {k: None for k, v in overrides.items() if v is None}
    policy = load_policy(None, **{k: v for k, v in overrides.items() if v is not None}).model_copy(update=unset)
    if admissible:
        policy = policy.model_copy(update={"faux": policy.faux.model_copy(update={"admissible": tuple(admissible)})})
    truth, c = run["truth"], np.asarray(run["c"])
    start = time.perf_counter()
    result = check_one_attribute(run["model"], run["frame"], policy=policy, feature_spec=run["spec"])
    wall = time.perf_counter() - start
    lo, hi = result.interval.lower, result.interval.upper
    true_share = float(np.mean(truth > TAU))
    return {
        "family": family, "target": target, "n": n, "seed": seed, "minority_rows": int((c == 1).sum()),
        "true_share": true_share, "flagged": result.flagged_fraction, "lower": lo, "upper": hi,
        "calibrated": bool(lo - 0.02 <= true_share <= hi + 0.02), "decision": result.decision,
        "aux_quality": result.aux_quality, "not_ok": [r["rule"] for r in result.rules if r["status"] != "ok"],
        "undecided_reasons": [r["detail"] for r in result.rules if r["status"] not in ("ok", "exceeded")],
        "crossfit": (result.provenance.get("cross_fit") or {}).get("folds"), "wall_s": round(wall, 1),
    }


def expected(row: dict) -> str | None:
    """The rule's verdict for one row: "failed" for a clearly unfair target, "passed" for a fair control."""
    if row["target"] == "unfair" and row["true_share"] >= 0.10:
        return "failed"
    if row["target"] == "fair" and row["true_share"] <= 0.01:
        return "passed"
    return None


def table(rows: list[dict]) -> str:
    """The markdown table of docs/benchmark.md: one line per family, target and n, the seeds side by side."""
    out = ["| family | target | n | minority rows | true share | flagged (per seed) | decisions | right |",
           "|---|---|---:|---:|---:|---|---|---:|"]
    keys = sorted({(r["family"], r["target"], r["n"]) for r in rows}, key=lambda k: (FAMILIES.index(k[0]), k[1], k[2]))
    for fam, tgt, n in keys:
        rs = sorted((r for r in rows if (r["family"], r["target"], r["n"]) == (fam, tgt, n)), key=lambda r: r["seed"])
        right = sum(1 for r in rs if expected(r) is None or r["decision"] == expected(r))
        out.append(f"| {fam} | {tgt} | {n:,} | {', '.join(str(r['minority_rows']) for r in rs)} | "
                   f"{', '.join(format(r['true_share'], '.1%') for r in rs)} | "
                   f"{', '.join(format(r['flagged'], '.1%') for r in rs)} | {', '.join(r['decision'] for r in rs)} | "
                   f"{right}/{len(rs)} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="1000,2000,5000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--targets", default="fair,unfair")
    add_run_file_arguments(ap)
    args = ap.parse_args(argv)
    if args.table:
        rows = read_runs(args.table)
        print(table(rows))
        return 0
    sources = bundled_sources(args.data_dir)
    rows = []
    for n in map(int, args.n.split(",")):
        for fam in args.families.split(","):
            for tgt in args.targets.split(","):
                for seed in map(int, args.seeds.split(",")):
                    row = one(fam, tgt, n, seed, sources)
                    rows.append(row)
                    verdict = expected(row)
                    mark = "" if verdict is None else ("  right" if row["decision"] == verdict else "  WRONG")
                    print(f"{fam:8s} {tgt:6s} n={n:5d} seed={seed} minority={row['minority_rows']:4d} "
                          f"truth={row['true_share']:6.1%} flagged={row['flagged']:6.1%} "
                          f"[{row['lower']:.1%}, {row['upper']:.1%}] aux={row['aux_quality']:.3f} "
                          f"folds={row['crossfit']} {row['decision']}{mark} ({row['wall_s']} s) "
                          f"{' '.join(row['not_ok'])}", flush=True)
                    append_run(args.out, row)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
