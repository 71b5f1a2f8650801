"""Families of the auxiliary-model check on ground truth: joint proxies, many levels, admissible-only, 3-class proxies,
many-valued links; the shipped policy's decision, its flagged fraction against the truth, and the ranking's AP.

One run per (family, target, seed): a target trained on bundled real rows with a generated protected attribute c,
``n`` audited rows, each person's individual fairness score (IFS) exact from the family's counterfactual, and the
gate's in-memory check (:func:`faux_checks.gate.one_attribute.check_one_attribute`) with the shipped default policy plus
``protected = "c"`` and the family's own declarations. Families (``faux_checks.groundtruth``):

- ``joint_sign``, ``joint_ratio``, ``joint_xor`` (:mod:`~faux_checks.groundtruth.joint`, Adult rows): c carried only
  jointly by two columns, each distributed alike in both groups; ``fair``: an MLP of the real block only (truth 0);
  ``unfair``: an MLP of every column on labels drawn from the family's interaction logit. No declarations.
- ``zip_inverse_cdf``, ``zip_gumbel`` (:mod:`~faux_checks.groundtruth.zipcode`, Adult rows): a 60-level categorical
  proxy generated under the comonotone (inverse-CDF) or the Gumbel-max coupling; targets as ``bench_coupling.py``.
  No declarations; the coupling readings and the Fréchet bounds of the flagged fraction are recorded.
- ``weak_mediator`` (mechanism ``weak_mediator``, Bank Marketing rows): an admissible mediator that reads c weakly and
  a proxy; ``fair``: an MLP of the admissible columns only (the real block and the mediator; truth 0); ``unfair``:
  every column, label bias 1.0. Declared admissible: the mediator (the real block is left to the independence hold:
  with every column of an admissible-only target declared, the check refuses the policy, nothing being left to test).
- ``multicat`` (mechanism ``multicat``, Bank rows): a 3-class c with a 5-level categorical proxy; ``fair``: an MLP of
  the real block only; ``unfair``: every column, label bias 0.8. Declared admissible: the real block.
- ``names``, ``names_balanced`` (mechanism ``names``, Bank rows, R = ``marital``): a definitional link with many values
  (three first names per group and marital status); ``fair``: an MLP of the real block only; ``unfair``: every column,
  label bias 0.8; ``names_balanced`` trains on rows resampled to equal class counts. Declared: the real block
  admissible, the generator's ``[linked_columns]`` (``by = "marital"``) with the ``linked_columns`` tester at δ. The
  linked-columns reading is also recorded under the declaration without ``by`` (every name of the group).

Per run: the truth (share with IFS > δ = 0.1), the flagged fraction and its interval, the decision, the AP against
IFS > δ of the gate's per-person ranking score and of the baselines that apply (FTA, weighted FTA, Unfair Map,
FlipTest with exact optimal transport, ≤ 1,500 rows per group: ``_readings.baseline_scores``; the linked-columns
tester where links are declared). The rule is in ``benchmarks/benchmark_notes.md`` ("Families of the
auxiliary-model check"); the table goes to docs/benchmark.md.

Usage::

    python benchmarks/bench_families.py --n 2000 --seeds 0,1,2 --out benchmarks/runs/families.json
    python benchmarks/bench_families.py --families names,names_balanced --seeds 0 --targets unfair
    python benchmarks/bench_families.py --table benchmarks/runs/families.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runfile import add_run_file_arguments, append_run, bundled_sources, read_runs  # noqa: E402  (benchmarks/ on the path)

TAU = 0.1
N_TRAIN = 8000
FAMILIES = ("joint_sign", "joint_ratio", "joint_xor", "zip_inverse_cdf", "zip_gumbel", "weak_mediator", "multicat",
            "names", "names_balanced")
#: family -> (mechanism, kind of c, the real column it builds on, the unfair target's label bias).
MECHANISM_FAMILIES = {"weak_mediator": ("weak_mediator", "binary", "log_duration", 1.0),
                      "multicat": ("multicat", "multiclass", None, 0.8),
                      "names": ("names", "binary", "marital", 0.8), "names_balanced": ("names", "binary", "marital", 0.8)}
BASELINE_NAMES = ("fta", "wfta", "unfair_map", "fliptest", "linked_columns")


def joint_build(construction: str, target: str, n: int, seed: int) -> dict:
    """A joint-only proxy run on Adult rows: model, spec, audited frame (with ``c``), truth, training rows."""
    from bench_coupling import REAL, income_logit
    from _cells import MaskedInputs, prob, train_mlp

    from faux_checks import FeatureSpec
    from faux_checks.groundtruth.joint import joint_fairness_scores, joint_unfair_logit, make_joint_data
    from faux_checks.inputs.datasets import load_adult

    adult = load_adult()
    rows = np.random.default_rng(seed).choice(len(adult), N_TRAIN + n, replace=False)
    data = make_joint_data(adult.iloc[rows][REAL].astype(float), construction=construction, seed=seed)
    train, audit = data.subset(np.arange(N_TRAIN)), data.subset(np.arange(N_TRAIN, N_TRAIN + n))
    frame = train.frame()
    spec = FeatureSpec.fit(frame, list(frame.columns))
    X_train = spec.encode(frame)
    logit = income_logit(frame) if target == "fair" else joint_unfair_logit(frame, construction, income_logit(frame))
    y = (np.random.default_rng(50 + seed).random(N_TRAIN) < 1 / (1 + np.exp(-logit))).astype(int)
    if target == "fair":
        real = np.isin(spec.feature_to_column(), [spec.source_columns.index(c) for c in REAL])
        net = MaskedInputs(train_mlp(X_train[:, real], y, seed=seed), real)
    else:
        net = train_mlp(X_train, y, seed=seed)
    truth = joint_fairness_scores(lambda f: prob(net, spec.encode(f)), audit)
    return {"model": net, "spec": spec, "frame": audit.frame().assign(c=audit.protected()), "truth": truth,
            "c": audit.c, "X_train": X_train, "c_train": train.c, "kind": "binary", "policy": {}}


def _balanced_rows(y: np.ndarray, size: int, seed: int) -> np.ndarray:
    """``size`` row indices, half of them with y = 1 and half with y = 0, drawn with replacement (seeded)."""
    rng = np.random.default_rng(70 + seed)
    half = size // 2
    return np.concatenate([rng.choice(np.flatnonzero(y == 1), half), rng.choice(np.flatnonzero(y == 0), size - half)])


def mechanism_build(family: str, target: str, n: int, seed: int, sources) -> dict:
    """A mechanisms run on Bank Marketing rows (``MECHANISM_FAMILIES``): model, spec, audited frame, truth, policy."""
    from _cells import MaskedInputs, prob, train_mlp

    from faux_checks import FeatureSpec
    from faux_checks.groundtruth.mechanisms import make_mechanism_data, mechanism_fairness_scores

    mechanism, kind, column, bias = MECHANISM_FAMILIES[family]
    base, y, _ = sources.base("bank")
    if column == "marital":                  # "unknown" (0.2% of the rows): its names would be too rare to encode
        keep = (base["marital"] != "unknown").to_numpy()
        base, y = base[keep].reset_index(drop=True), y[keep]
    pool = 3 * N_TRAIN if family == "names_balanced" else N_TRAIN
    rows = np.random.default_rng(seed).choice(len(base), pool + n, replace=False)
    data = make_mechanism_data(base.iloc[rows], y[rows], mechanism=mechanism, kind=kind, n_groups=3,
                               bias=0.0 if target == "fair" else bias, seed=seed,
                               **({"column": column} if column else {}))
    train_rows = _balanced_rows(data.y[:pool], N_TRAIN, seed) if family == "names_balanced" else np.arange(N_TRAIN)
    train, audit = data.subset(train_rows), data.subset(np.arange(pool, pool + n))
    frame = train.frame()
    columns = list(frame.columns)
    if target == "fair" and family == "weak_mediator":            # admissible only: the real block and the mediator
        columns = [c for c in columns if c in data.admissible]
    spec = FeatureSpec.fit(frame, columns, min_frequency=50)
    X_train = spec.encode(frame)
    if target == "fair" and family != "weak_mediator":            # blind to every column c causes
        real = np.isin(spec.feature_to_column(), [spec.source_columns.index(c) for c in base.columns
                                                   if c in spec.source_columns])
        net = MaskedInputs(train_mlp(X_train[:, real], train.y, seed=seed), real)
    else:
        net = train_mlp(X_train, train.y, seed=seed)
    truth = mechanism_fairness_scores(lambda f: prob(net, spec.encode(f)), audit)
    declared = ["mediator"] if family == "weak_mediator" else data.admissible   # the mediator alone: the rest is held
    policy: dict = {"admissible": [c for c in declared if c in spec.source_columns]}
    if kind == "multiclass":
        policy["protected_kind"] = "multiclass"
    if data.links:
        policy.update(linked_columns=data.links, testers={"linked_columns": {"threshold": TAU}})
    return {"model": net, "spec": spec, "frame": audit.frame().assign(c=audit.protected()), "truth": truth,
            "c": audit.c, "X_train": X_train, "c_train": train.c, "kind": kind, "policy": policy}


def build(family: str, target: str, n: int, seed: int, sources) -> dict:
    """The run's data, target and truth (module docstring)."""
    if family.startswith("joint_"):
        return joint_build(family.removeprefix("joint_"), target, n, seed)
    if family.startswith("zip_"):
        from bench_coupling import build as zip_build

        return {**zip_build(family.removeprefix("zip_"), target, n, seed), "kind": "binary", "policy": {}}
    return mechanism_build(family, target, n, seed, sources)


def family_policy(overrides: dict):
    """The shipped default policy with ``protected = "c"``, no label, and the family's declarations."""
    from faux_checks import load_policy
    from faux_checks.gate.policy import Policy

    base = load_policy(None, protected="c").model_copy(update={"label": None}).model_dump()
    if overrides.get("admissible"):
        base["faux"] = {**base["faux"], "admissible": list(overrides["admissible"])}
    for key in ("protected_kind", "linked_columns"):
        if key in overrides:
            base[key] = overrides[key]
    for name, settings in overrides.get("testers", {}).items():
        base["testers"] = {**base["testers"], name: settings}
    return Policy.model_validate(base)


def undeclared_by(links: dict) -> dict:
    """The links without ``by``: every value of a group tied to it whatever the other column holds."""
    out = {}
    for column, mapping in links.items():
        tables = {g: t for g, t in mapping.items() if g != "by"}
        out[column] = {g: [v for vals in t.values() for v in vals] if isinstance(t, dict) else t
                       for g, t in tables.items()}
    return out


def linked_scores(cell: dict) -> dict:
    """The linked-columns tester's scores (mean over tied values) under the declaration and without its ``by``."""
    from _cells import prob

    from faux_checks.baselines.linked_columns import LinkedColumnsTester

    links = cell["policy"].get("linked_columns")
    if not links:
        return {}
    spec, frame, m = cell["spec"], cell["frame"], int(cell["c"].max()) + 1
    groups = [f"g{k}" for k in range(m)]
    out = {}
    for name, declared in (("linked_columns", links), ("linked_columns_no_by", undeclared_by(links))):
        tester = LinkedColumnsTester(lambda f: prob(cell["model"], spec.encode(f)), protected="c", links=declared,
                                     groups=groups)
        out[name] = tester.score(frame, np.asarray(cell["c"]))
    return out


def baseline_scores(cell: dict) -> dict:
    """FTA, weighted FTA, Unfair Map and FlipTest (``_readings.baseline_scores``) on the audited rows, and the
    linked-columns tester where links are declared: name -> scores (n,)."""
    import _readings

    X = cell["spec"].encode(cell["frame"]).astype(np.float32)
    view = SimpleNamespace(target=cell["model"], X=X, c=np.asarray(cell["c"]), X_ref=cell["X_train"],
                           c_ref=np.asarray(cell["c_train"]), kind=cell["kind"], keep=np.ones(X.shape[1], dtype=bool))
    return {**_readings.baseline_scores(view), **linked_scores(cell)}


def average_precision(scores, positive) -> float | None:
    """AP of ``scores`` against ``positive``; None where every row or none is positive."""
    from testers import average_precision as ap

    value = ap(scores, positive)
    return None if not np.isfinite(value) else value


def faux_ranking(result) -> np.ndarray:
    """The gate's per-person ranking score at δ (:func:`faux_checks.method.ranking.ranking_score`) of every row."""
    from faux_checks.method.ranking import ranking_score

    scores = np.asarray(result.scores, dtype=np.float64)
    undefined = ~np.isfinite(scores)
    return ranking_score(scores, np.nan_to_num(np.asarray(result.flag_probability, dtype=np.float64), nan=1.0),
                         undefined)


def one(family: str, target: str, n: int, seed: int, sources) -> dict:
    """Build the run, check it with the shipped policy and the family's declarations; one JSON-ready row."""
    from bench_coupling import coupling_record

    from faux_checks.gate.one_attribute import check_one_attribute

    t0 = time.perf_counter()
    cell = build(family, target, n, seed, sources)
    policy = family_policy(cell["policy"])
    start = time.perf_counter()
    result = check_one_attribute(cell["model"], cell["frame"], policy=policy, feature_spec=cell["spec"])
    wall = time.perf_counter() - start
    positive = np.asarray(cell["truth"]) > TAU
    base = baseline_scores(cell)
    aps = {name: average_precision(s, positive) for name, s in base.items()}
    best = max(((v, k) for k, v in aps.items() if v is not None and k in BASELINE_NAMES), default=(None, None))
    truth = float(positive.mean())
    lo, hi = result.interval.lower, result.interval.upper
    row = {"family": family, "target": target, "n": n, "seed": seed, "truth": truth,
           "flagged": result.flagged_fraction, "lower": lo, "upper": hi,
           "calibrated": bool(lo - 0.02 <= truth <= hi + 0.02), "decision": result.decision,
           "aux_quality": result.aux_quality, "ap_faux": average_precision(faux_ranking(result), positive),
           "ap_baselines": aps, "ap_best_baseline": best[0], "best_baseline": best[1],
           "ap_fliptest": aps.get("fliptest"),
           "baseline_flagged": {k: float(np.mean(np.asarray(s) > TAU)) for k, s in base.items()},
           "not_ok": [r["rule"] for r in result.rules if r["status"] not in ("ok", "exceeded")],
           "undecided_reasons": [r["detail"] for r in result.rules if r["status"] not in ("ok", "exceeded")],
           "check_s": round(wall, 1), "wall_s": round(time.perf_counter() - t0, 1)}
    if result.provenance.get("couplings"):           # a categorical column moves: the readings per coupling
        row.update(coupling_record(result))
    return row


def expected(row: dict) -> str | None:
    """The rule's verdict: "failed" for a clearly unfair target (truth ≥ 10%), "not failed" (passed, or undecided
    with a reason) for a fair control (truth ≤ 1%); None otherwise."""
    if row["target"] == "unfair" and row["truth"] >= 0.10:
        return "failed"
    if row["target"] == "fair" and row["truth"] <= 0.01:
        return "not failed"
    return None


def right(row: dict) -> bool | None:
    """Whether the decision meets :func:`expected` (None where the rule does not judge the run)."""
    verdict = expected(row)
    if verdict is None:
        return None
    if verdict == "failed":
        return row["decision"] == "failed"
    return row["decision"] == "passed" or (row["decision"] == "undecided" and bool(row["undecided_reasons"]))


def wrong_pass(row: dict) -> bool:
    """A clearly unfair target (truth ≥ 10%) that passed."""
    return row["target"] == "unfair" and row["truth"] >= 0.10 and row["decision"] == "passed"


def _mean_ap(rows: list[dict], key: str) -> str:
    """The mean of ``key`` over the rows where it is defined ("–" where none is)."""
    values = [r[key] for r in rows if r[key] is not None]
    return f"{np.mean(values):.2f}" if values else "–"


def _ap(v) -> str:
    return "–" if v is None else f"{v:.2f}"


def table(rows: list[dict]) -> str:
    """Markdown: one line per run, then one per family (decisions right / judged, wrong passes, calibrated cells,
    mean AP of fAux, of the best baseline and of FlipTest over the runs where the truth has both classes)."""
    order = {f: i for i, f in enumerate(FAMILIES)}
    rows = sorted(rows, key=lambda r: (order.get(r["family"], 99), r["n"], r["target"], r["seed"]))
    out = ["| family | target | n | seed | truth | flagged [interval] | decision | AP fAux / best baseline / FlipTest |",
           "|---|---|---:|---:|---:|---|---|---|"]
    for r in rows:
        best = f"{_ap(r['ap_best_baseline'])} ({r['best_baseline']})" if r["best_baseline"] else "–"
        mark = {True: "", False: " (wrong)", None: ""}[right(r)]
        out.append(f"| {r['family']} | {r['target']} | {r['n']:,} | {r['seed']} | {r['truth']:.1%} | "
                   f"{r['flagged']:.1%} [{r['lower']:.1%}, {r['upper']:.1%}] | {r['decision']}{mark} | "
                   f"{_ap(r['ap_faux'])} / {best} / {_ap(r['ap_fliptest'])} |")
    out += ["", "| family | n | decisions right / judged | wrong passes | calibrated cells | mean AP fAux | "
            "mean AP best baseline | mean AP FlipTest |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for fam, n in sorted({(r["family"], r["n"]) for r in rows}, key=lambda k: (order.get(k[0], 99), k[1])):
        rs = [r for r in rows if (r["family"], r["n"]) == (fam, n)]
        judged = [right(r) for r in rs if right(r) is not None]
        ranked = [r for r in rs if r["ap_faux"] is not None]
        out.append(f"| {fam} | {n:,} | {sum(judged)}/{len(judged)} | {sum(wrong_pass(r) for r in rs)} | "
                   f"{sum(r['calibrated'] for r in rs)}/{len(rs)} | {_mean_ap(ranked, 'ap_faux')} | "
                   f"{_mean_ap(ranked, 'ap_best_baseline')} | {_mean_ap(ranked, 'ap_fliptest')} |")
    return "\n".join(out + coupling_table(rows) + linked_table(rows))


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def coupling_table(rows: list[dict]) -> list[str]:
    """Markdown lines for the runs in which a categorical column moves: the flagged fraction under each coupling the gate reads, the
    Fréchet bounds over every coupling, and the ``level_coupling`` line (none without such runs)."""
    rs = [r for r in rows if r.get("readings")]
    if not rs:
        return []
    out = ["", "| family | target | n | seed | truth | comonotone | Gumbel-max | Fréchet bounds | decision | robust |",
           "|---|---|---:|---:|---:|---:|---:|---|---|---|"]
    for r in rs:
        rd, rule = r.get("readings") or {}, r.get("coupling_rule") or {}
        bounds = r.get("bounds") or [None, None]
        out.append(f"| {r['family']} | {r['target']} | {r['n']:,} | {r['seed']} | {r['truth']:.1%} | "
                   f"{_pct(rd.get('comonotone'))} | {_pct(rd.get('gumbel'))} | {_pct(bounds[0])}–{_pct(bounds[1])} | "
                   f"{r['decision']} | {rule.get('detail', 'n/a').split(':')[0]} |")
    return out


def linked_table(rows: list[dict]) -> list[str]:
    """Markdown lines for the many-valued links: the truth, the gate's flagged fraction, and the linked-columns
    tester's under the declaration (``by`` the marital status) and without ``by`` (none without such runs)."""
    rs = [r for r in rows if "linked_columns" in r["baseline_flagged"]]
    if not rs:
        return []
    out = ["", "| family | target | n | seed | truth | flagged (fAux) | linked columns, by marital | "
           "linked columns, without by | AP linked, by / without |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rs:
        f, a = r["baseline_flagged"], r["ap_baselines"]
        out.append(f"| {r['family']} | {r['target']} | {r['n']:,} | {r['seed']} | {r['truth']:.1%} | "
                   f"{r['flagged']:.1%} | {f['linked_columns']:.1%} | {f['linked_columns_no_by']:.1%} | "
                   f"{_ap(a.get('linked_columns'))} / {_ap(a.get('linked_columns_no_by'))} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="2000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--targets", default="unfair,fair")
    add_run_file_arguments(ap)
    args = ap.parse_args(argv)
    if args.table:
        print(table(read_runs(args.table)))
        return 0
    sources, rows = bundled_sources(args.data_dir), []
    for n in map(int, args.n.split(",")):
        for seed in map(int, args.seeds.split(",")):
            for fam in args.families.split(","):
                for tgt in args.targets.split(","):
                    row = one(fam, tgt, n, seed, sources)
                    rows.append(row)
                    mark = {True: "  right", False: "  WRONG", None: ""}[right(row)]
                    print(f"{fam:15s} {tgt:6s} n={n} seed={seed} truth={row['truth']:6.1%} "
                          f"flagged={row['flagged']:6.1%} [{row['lower']:.1%}, {row['upper']:.1%}] "
                          f"aux={row['aux_quality']:.3f} {row['decision']}{mark} AP fAux={_ap(row['ap_faux'])} "
                          f"best={_ap(row['ap_best_baseline'])} ({row['best_baseline']}) "
                          f"FlipTest={_ap(row['ap_fliptest'])} ({row['check_s']} s check, {row['wall_s']} s) "
                          f"{' '.join(row['not_ok'])}", flush=True)
                    append_run(args.out, row)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
