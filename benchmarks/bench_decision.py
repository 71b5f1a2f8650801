"""The measurements behind two defaults of the policy's ``[decision]`` section, on UCI Adult.

``--part seeds``: the cost of the flagged fraction's interval over auxiliary-model seeds on all of
Adult (48,842 rows: ``load_adult(drop_missing=False)`` with the missing categorical values as the
level ``"?"``, which the demo's FeatureSpec maps to ``__infrequent__``). The demo's five versions
(:func:`faux_checks_app.demo.build_demo_versions`, seed 0) are checked with the Adult policy and
``aux_seeds`` = 1 (the interval over individuals only), 3 on a 20,000-row sample, 3 on every row
and 5 on every row; the wall time of ``check_one_attribute`` (best of ``--repeats``), the extra seconds
over one seed, the flagged fraction per seed and the interval are printed.

``--part groups``: the smallest protected group that still gives the evidence a decision needs.
All men are kept and the women are subsampled to k rows (k in ``--k``, three subsamples each);
``check_one_attribute`` (v1 and v2, Adult policy, one aux seed) then gives, per k: the aux model's held-out
women, its AUC and the Hanley–McNeil lower bound, and the flagged fraction among the men, whose
counterfactual is built from the women's rows (the swap reference's per-group fit), against its
value with every woman present.

Run: ``python benchmarks/bench_decision.py --part seeds`` (about 5 minutes on 2 cores) or
``--part groups`` (about 4 minutes); ``--json PATH`` writes every number.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from faux_checks.gate.one_attribute import check_one_attribute  # noqa: E402
from faux_checks.gate.policy import load_policy, policy_path  # noqa: E402
from faux_checks.inputs.datasets import load_adult  # noqa: E402
from faux_checks.inputs.models import load_model  # noqa: E402
from faux_checks.inputs.tabular import FeatureSpec  # noqa: E402
from faux_checks_app.demo import build_demo_versions  # noqa: E402

FILLED = {"workclass": "?", "occupation": "?", "native-country": "?"}


def _adult():
    return load_adult(drop_missing=False).fillna(FILLED).drop(columns=["split"], errors="ignore")


def _timed(model, data, policy, spec, repeats):
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = check_one_attribute(model, data, policy=policy, feature_spec=spec)
        best = min(best, time.perf_counter() - t0)
    return best, result


def part_seeds(versions, repeats: int) -> list[dict]:
    data, base = _adult(), load_policy(policy_path("adult"))
    configs = [("1 seed", 1, 20_000), ("3 seeds, 20,000-row sample", 3, 20_000), ("3 seeds, all rows", 3, 100_000),
               ("5 seeds, all rows", 5, 100_000)]
    rows = []
    for v in versions:
        model, spec = load_model(v.model_path), FeatureSpec.load(v.spec_path)
        check_one_attribute(model, data.head(2000), policy=base, feature_spec=spec)      # warm-up (imports, first passes)
        one = None
        for label, seeds, sample in configs:
            policy = base.with_overrides(decision={"aux_seeds": seeds, "aux_seed_rows": sample})
            wall, r = _timed(model, data, policy, spec, repeats)
            one = wall if seeds == 1 else one
            iv = r.interval
            row = {"version": v.name, "config": label, "wall_s": round(wall, 2), "extra_s": round(wall - one, 2),
                   "decision": r.decision, "flagged": iv.fraction, "lower": iv.lower, "upper": iv.upper,
                   "individuals": list(iv.individuals), "seed_fractions": (iv.seeds or {}).get("fractions"),
                   "spread": (iv.seeds or {}).get("spread")}
            rows.append(row)
            print(f"{v.name:3} {label:28} {wall:6.2f} s (+{wall - one:5.2f}) {r.decision:9} {iv.text()}"
                  f"  seeds {[round(f, 4) for f in row['seed_fractions'] or []]}", flush=True)
    return rows


def part_groups(versions, ks: list[int]) -> list[dict]:
    data = load_adult()          # the check refuses missing values; 45,222 complete rows
    women, men = data[data["sex"] == "Female"], data[data["sex"] == "Male"]
    policy = load_policy(policy_path("adult")).with_overrides(decision={"aux_seeds": 1, "min_group_rows": 1})
    rows = []
    for v in versions:
        model, spec = load_model(v.model_path), FeatureSpec.load(v.spec_path)
        full = check_one_attribute(model, data, policy=policy, feature_spec=spec)
        men_full = _men_fraction(full, data)
        for k in ks:
            for rep in range(3):
                sub = women.sample(k, random_state=rep) if k < len(women) else women
                frame = data.loc[sorted(list(men.index) + list(sub.index))].reset_index(drop=True)
                r = check_one_attribute(model, frame, policy=policy, feature_spec=spec)
                held = {g["group"]: g["holdout"] for g in r.group_rows}
                aux = r.aux_intervals[0]
                men_k = _men_fraction(r, frame)
                rows.append({"version": v.name, "k": k, "rep": rep, "holdout_women": held.get("Female"),
                             "auc": aux["quality"], "auc_lower": aux["lower"], "men_flagged": men_k,
                             "men_flagged_full": men_full, "men_shift": men_k - men_full})
                print(f"{v.name:3} k={k:5} rep {rep}: held-out women {held.get('Female'):5}  AUC {aux['quality']:.3f} "
                      f"(lower {aux['lower']:.3f})  men flagged {men_k:.2%} (all women: {men_full:.2%}, "
                      f"{men_k - men_full:+.2%})", flush=True)
    return rows


def _men_fraction(result, frame) -> float:
    by = result.by_group
    return float(by.loc["Male", "flagged_fraction"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["seeds", "groups"], required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--versions", default="v1,v2,v3,v4,v5")
    ap.add_argument("--k", default="5,10,20,30,50,100,150,300,1000")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        versions = [v for v in build_demo_versions(Path(tmp) / "demo", seed=0) if v.name in args.versions.split(",")]
        rows = (part_seeds(versions, args.repeats) if args.part == "seeds"
                else part_groups(versions, [int(k) for k in args.k.split(",")]))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
