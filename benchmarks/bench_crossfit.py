"""A lending file of ordinary size under the shipped defaults: cross-fitted against single-split decisions.

Data (:func:`lending_frame`): n rows, a share of them in the protected group; ``wage`` and ``debt`` independent
of the group, ``proxy`` = 0.87·[protected] + N(0, 1) (an auxiliary ROC-AUC of Φ(0.87/√2) ≈ 0.73). The fair target
reads wage and debt; the unfair one also the proxy (logit weight ``w``). Ground truth per row: the proxy moves by
∓0.87 when only the group changes (the other group's distribution, shifted), so the true share is
P(|σ(z ∓ 0.87·w) − σ(z)| > δ).

    python benchmarks/bench_crossfit.py [--n 2400] [--share 0.14] [--seeds 0 1 2] [--folds 5 0]
    python benchmarks/bench_crossfit.py --weak        # the flagged fraction of weakened aux models against the truth

Prints one line per cell: folds, data seed, target, true share, flagged fraction (interval), aux quality (interval),
decision, wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch
from torch import nn

SHIFT = 0.87


def lending_frame(n: int, share: float, seed: int) -> pd.DataFrame:
    """``wage``, ``debt``, ``proxy``, ``group`` ("protected" / "other"): the module docstring's generator."""
    rng = np.random.default_rng(seed)
    protected = rng.random(n) < share
    return pd.DataFrame({"wage": rng.normal(size=n), "debt": rng.normal(size=n),
                         "proxy": SHIFT * protected + rng.normal(size=n),
                         "group": np.where(protected, "protected", "other")})


def target(weight: float) -> nn.Module:
    """logit = 1.5·wage − 1.0·debt − weight·proxy (inputs in that column order)."""
    lin = nn.Linear(3, 1)
    with torch.no_grad():
        lin.weight[:] = torch.tensor([[1.5, -1.0, -weight]])
        lin.bias[:] = 0.0
    return lin.eval()


def true_share(frame: pd.DataFrame, weight: float, delta: float) -> float:
    """Share of rows whose P(y = 1) moves by more than delta when only the group changes (the proxy with it)."""
    z = 1.5 * frame.wage - 1.0 * frame.debt - weight * frame.proxy
    sign = np.where(frame.group == "protected", -1.0, 1.0)
    p, q = 1 / (1 + np.exp(-z)), 1 / (1 + np.exp(-(z - weight * SHIFT * sign)))
    return float(np.mean(np.abs(q - p) > delta))


def cell(frame: pd.DataFrame, weight: float, folds: int, **aux) -> tuple:
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.aux_cache import clear_aux_cache
    from faux_checks.gate.policy import load_policy

    policy = load_policy(protected="group")
    policy = policy.model_copy(update={"label": None, "aux": policy.aux.model_copy(update={"cross_fit_folds": folds, **aux})})
    clear_aux_cache()
    start = time.perf_counter()
    res = check_one_attribute(target(weight), frame[["wage", "debt", "proxy", "group"]], policy=policy)
    return res, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2400)
    ap.add_argument("--share", type=float, default=0.14)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--folds", type=int, nargs="+", default=[0, 5])
    ap.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.5])
    ap.add_argument("--weak", action="store_true", help="aux epochs 30, 3, 1 (cross-fitted) against the truth")
    args = ap.parse_args()
    torch.set_num_threads(1)
    settings = [{"epochs": e} for e in (30, 3, 1)] if args.weak else [{}]
    for seed in args.seeds:
        frame = lending_frame(args.n, args.share, seed)
        for weight in args.weights:
            truth = true_share(frame, weight, 0.1)
            for folds in args.folds:
                for aux in settings:
                    res, wall = cell(frame, weight, folds, **aux)
                    iv, q = res.interval, res.aux_intervals[0]
                    groups = {r["group"]: r["holdout"] for r in res.group_rows}
                    print(f"folds={folds} seed={seed} weight={weight:g} {aux or ''} truth={truth:.2%} "
                          f"flagged={iv.fraction:.2%} [{iv.lower:.2%}, {iv.upper:.2%}] "
                          f"aux={q['quality']:.3f} [{q['lower']:.3f}, {q['upper']:.3f}] held-out={groups} "
                          f"decision={res.decision} wall={wall:.1f}s", flush=True)
                    for r in res.rules:
                        if r["status"] not in ("ok",):
                            print(f"    {r['rule']}: {r['status']}: {r['detail'][:300]}")


if __name__ == "__main__":
    main()
