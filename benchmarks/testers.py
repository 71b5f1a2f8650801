"""Ground-truth benchmark of individual-fairness testers on fused synthetic data (fAux RQ1, RQ4).

Data: :func:`faux_checks.groundtruth.fused.make_fused_data` (our reconstruction of the paper's generator)
fusing UCI Adult (x̂: age, education-num, log1p capital-gain, log1p capital-loss, hours-per-week;
y = income > 50K) with UCI Bank Marketing (x̃: age, log1p duration, log1p campaign, previous,
emp.var.rate, cons.price.idx, cons.conf.idx, euribor3m; c = subscribed), read from
``shared/data`` (``--data-dir``). For every bias level × fusion × seed:

- target: MLP d-32-32-1 (logit) trained on (x, y) only, Adam, 20 epochs;
- aux: :class:`faux_checks.AuxiliaryModel` (64, 64) trained on (x, c) of the same rows;
- audit rows (``--n-audit``, fresh draws of the same generator): ground truth
  IFS = |f(x) − f(x with c swapped, z⊥ fixed)|, and every tester's score;
- ranking quality of each tester against the label "IFS > τ" (ROC-AUC, average precision),
  precision/recall at each tester's default threshold, seconds per 10,000 individuals.

Also: fAux variants (plain eq. 9 / NG / IG with three baselines; aux output logit vs probability;
ridge λ; the "either gradient small" reading of Figure 1), RQ4 (a weakened aux model: fewer rows /
epochs; its AUC vs fAux's AP, and the flagged fraction of a bias-0 target).

Writes ``docs/benchmark.md`` and ``docs/benchmark.png`` (``docs/benchmark_rq4.png`` in full mode).
The last line printed is ``faux_ap=<a> lic_ub_ap=<b> best_baseline_ap=<c>`` at bias 0.6, concat
(mean over seeds).

Run from a checkout: ``python benchmarks/testers.py --quick`` (< 3 minutes on 2 CPU cores) or
``python benchmarks/testers.py`` (full grid, ~10-15 minutes). ``--quick`` writes its report to a temporary folder;
the full run writes ``docs/benchmark.md``. ``--no-duration`` runs the robustness configuration (Bank without
the call duration), ``--from-json``/``--extra-json`` merge saved runs into one report.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

# run from a checkout without installing: the repository root holds the faux_checks package
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TAU = 0.1              # ground-truth label: IFS > TAU (change of the target probability)
DELTA = 0.05           # fAux default δ (policies/default.toml), Δŷ per unit aux logit
BIASES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
DELTA_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3)   # flagged fraction vs δ (open point 5)
FUSIONS = ("concat", "outer")
ADULT_COLS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income",
]
BASELINES = ("fta", "wfta", "wfta_complement", "unfair_map", "fliptest", "fliptest_quantile")
MAIN = ("lic_ub", "faux", "faux_ng", "faux_ig", "fta", "wfta", "wfta_complement", "unfair_map", "fliptest",
        "fliptest_quantile", "ftu_flip")
LABELS = {
    "lic_ub": "LIC-UB (true ∂x/∂c; oracle)",
    "faux": "fAux eq. 9 (logit aux, λ=0)",
    "faux_ng": "fAux+NG (eq. 10)",
    "faux_ig": "fAux+IG (baseline: training mean, 32 steps)",
    "fta": "FTA ‖∇f‖₂",
    "wfta": "weighted FTA ‖P_S ∇f‖₂",
    "wfta_complement": "weighted FTA ‖(I−P_S)∇f‖₂",
    "unfair_map": "Unfair Map loss ratio",
    "fliptest": "FlipTest (exact OT, ≤2,000/group)",
    "fliptest_quantile": "FlipTest (per-feature quantile map)",
    "ftu_flip": "FTU flip",
}
# default thresholds: the policy's where one exists, else τ for scores in IFS units
THRESHOLDS = {
    "lic_ub": TAU, "faux": DELTA, "faux_ng": 0.5, "faux_ig": DELTA, "fta": 0.5, "wfta": TAU,
    "wfta_complement": TAU, "unfair_map": 2.0, "fliptest": TAU, "fliptest_quantile": TAU, "ftu_flip": TAU,
    "faux_prob": DELTA, "faux_fig1_product": DELTA, "faux_fig1_projection": DELTA,
}


# ---------------------------------------------------------------------------- data
def load_sources(data_dir: Path):
    """Adult (D̂) and Bank Marketing (D̃) as numeric frames and 0/1 labels."""
    import pandas as pd

    adult = pd.read_csv(data_dir / "adult" / "adult.data", header=None, names=ADULT_COLS, skipinitialspace=True,
                        na_values="?")
    x_hat = pd.DataFrame({
        "age": adult["age"], "education_num": adult["education-num"],
        "log_capital_gain": np.log1p(adult["capital-gain"]), "log_capital_loss": np.log1p(adult["capital-loss"]),
        "hours_per_week": adult["hours-per-week"],
    }).astype(float)
    y_hat = (adult["income"].str.strip() == ">50K").astype(int).to_numpy()
    bank = pd.read_csv(data_dir / "bank_marketing" / "bank-additional-full.csv", sep=";")
    x_tilde = pd.DataFrame({
        "b_age": bank["age"], "log_duration": np.log1p(bank["duration"]), "log_campaign": np.log1p(bank["campaign"]),
        "previous": bank["previous"], "emp_var_rate": bank["emp.var.rate"], "cons_price_idx": bank["cons.price.idx"],
        "cons_conf_idx": bank["cons.conf.idx"], "euribor3m": bank["euribor3m"],
    }).astype(float)
    y_tilde = (bank["y"] == "yes").astype(int).to_numpy()
    return x_hat, y_hat, x_tilde, y_tilde


# ---------------------------------------------------------------------------- models
def train_target(X: np.ndarray, y: np.ndarray, *, seed: int, hidden=(32, 32), epochs: int = 20, lr: float = 3e-3,
                 batch_size: int = 128, weight_decay: float = 1e-3):
    """MLP with one logit output, trained on (x, y) only (c is never an input)."""
    import torch
    from torch import nn

    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        layers, width = [], X.shape[1]
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        net = nn.Sequential(*layers, nn.Linear(width, 1))
    Xt, yt = torch.from_numpy(X).float(), torch.from_numpy(y).float()
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        perm = torch.randperm(len(Xt), generator=gen)
        for start in range(0, len(Xt), batch_size):
            idx = perm[start:start + batch_size]
            opt.zero_grad()
            nn.functional.binary_cross_entropy_with_logits(net(Xt[idx])[:, 0], yt[idx]).backward()
            opt.step()
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def fit_aux(X, c, *, seed: int, epochs: int = 30, n_rows: int | None = None, hidden=(64, 64)):
    from faux_checks import AuxiliaryModel

    if n_rows is not None and n_rows < len(X):
        rows = np.random.default_rng(seed + 7).choice(len(X), n_rows, replace=False)
        X, c = X[rows], c[rows]
    return AuxiliaryModel(kind="binary", hidden=hidden, epochs=epochs, seed=seed).fit(X, c)


def with_output_space(aux, space: str):
    """The same fitted aux network, differentiated in another output space (open point 1)."""
    other = copy.copy(aux)
    other.output_space = space
    return other


# ---------------------------------------------------------------------------- metrics
def ranking(scores: np.ndarray, positive: np.ndarray) -> dict:
    from sklearn.metrics import average_precision_score, roc_auc_score

    s = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=np.inf, posinf=np.finfo(float).max)
    if positive.all() or not positive.any():
        return {"auc": float("nan"), "ap": float("nan")}
    return {"auc": float(roc_auc_score(positive, s)), "ap": float(average_precision_score(positive, s))}


def at_threshold(scores: np.ndarray, positive: np.ndarray, threshold: float) -> dict:
    flagged = np.nan_to_num(scores, nan=np.inf) > threshold          # undefined rows count as flagged here
    tp = int((flagged & positive).sum())
    return {
        "flagged": float(flagged.mean()),
        "precision": tp / flagged.sum() if flagged.any() else float("nan"),
        "recall": tp / positive.sum() if positive.any() else float("nan"),
    }


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


# ---------------------------------------------------------------------------- one cell
def run_cell(sources, *, bias: float, fusion: str, seed: int, n_train: int, n_audit: int,
             ig_variants: bool, rq4: bool) -> dict:
    import torch

    from faux_checks import FAuxTester, TargetOutput
    from faux_checks.baselines import (
        FlipTestTester,
        FTATester,
        UnfairMapTester,
        WeightedFTATester,
        fit_sensitive_subspace,
    )
    from faux_checks.method._batching import as_tensor
    from faux_checks.method.gradients import target_probability_and_gradient
    from faux_checks.method.lic import faux_ng_scores, faux_scores, lic_upper_bound
    from faux_checks.groundtruth.fused import individual_fairness_scores, make_fused_data

    logit = TargetOutput(form="logit")
    train = make_fused_data(*sources, n=n_train, bias=bias, fusion=fusion, seed=1000 * seed + 1)
    audit = make_fused_data(*sources, n=n_audit, bias=bias, fusion=fusion, seed=1000 * seed + 2)
    target, t_target = timed(lambda: train_target(train.X, train.y, seed=seed))
    aux, t_aux = timed(lambda: fit_aux(train.X, train.c, seed=seed))
    X, c = audit.X, audit.c
    ifs = individual_fairness_scores(target, audit, output=logit)
    positive = ifs > TAU
    from sklearn.metrics import roc_auc_score

    with torch.no_grad():
        target_auc = float(roc_auc_score(audit.y, target(torch.from_numpy(X))[:, 0].numpy()))
    out = {"bias": bias, "fusion": fusion, "seed": seed, "d": int(X.shape[1]), "n_audit": int(len(X)),
           "positive_rate": float(positive.mean()), "ifs_p50": float(np.median(ifs)), "ifs_p90": float(np.quantile(ifs, 0.9)),
           "target_auc": target_auc, "aux_auc": float(aux.quality_), "fit_seconds": {"target": t_target, "aux": t_aux},
           "corr_y_c": float(np.corrcoef(train.y, train.c)[0, 1]), "testers": {}}
    scores: dict[str, np.ndarray] = {}

    Xt = as_tensor(X)
    _, g = target_probability_and_gradient(target, Xt, logit)
    scores["lic_ub"] = lic_upper_bound(g, torch.from_numpy(audit.dx_dc())).numpy()
    scores["faux"] = FAuxTester(target, aux, output=logit).score(X)
    scores["faux_ng"] = FAuxTester(target, aux, variant="ng", output=logit).score(X)
    train_mean = train.X.mean(axis=0)
    scores["faux_ig"] = FAuxTester(target, aux, variant="ig", ig_baseline=train_mean, output=logit).score(X)
    scores["fta"] = FTATester(target, output=logit).score(X)
    basis = fit_sensitive_subspace(train.X, train.c)
    scores["wfta"] = WeightedFTATester(target, basis=basis, output=logit).score(X)
    scores["wfta_complement"] = WeightedFTATester(target, basis=basis, subspace="complement", output=logit).score(X)
    scores["unfair_map"] = UnfairMapTester(target, basis=basis, output=logit).score(X)
    scores["fliptest"] = FlipTestTester(target, output=logit, seed=seed).score(X, c)
    scores["fliptest_quantile"] = FlipTestTester(target, method="quantile", output=logit).score(X, c)

    # ---- fAux variants from the same gradients (open points 1-3)
    J_logit = aux.jacobian(X)                                                  # (n, 1, d)
    J_prob = with_output_space(aux, "probability").jacobian(X)
    gg = g.double()
    gap = group_logit_gap(aux, train.X, train.c)
    out["aux_logit_gap"] = gap
    scores.update(_readings(gg, J_logit, gap))
    scores["faux_prob"] = faux_scores(gg, J_prob).scores.numpy()
    for lam in (1e-4, 1e-3, 1e-2):
        scores[f"faux_prob_ridge_{lam:g}"] = faux_scores(gg, J_prob, ridge=lam).scores.numpy()
    with torch.no_grad():
        p_aux = torch.sigmoid(aux.net_(Xt)[:, 0].double()).numpy()
        swing = (aux.net_(as_tensor(audit.swapped()))[:, 0] - aux.net_(Xt)[:, 0]).abs().double().numpy()
    out["aux_stats"] = {
        "share_confident": float(np.mean((p_aux < 0.02) | (p_aux > 0.98))),
        "a_logit_norm_p50": float(np.median(J_logit[:, 0].double().norm(dim=1).numpy())),
        "logit_swing_p50": float(np.median(swing)),          # |aux logit(x_swapped) − aux logit(x)|
    }
    out["undefined"] = {"faux": int(np.isnan(scores["faux"]).sum()), "faux_prob": int(np.isnan(scores["faux_prob"]).sum())}

    # ---- open point 4: IG baselines and steps (expensive through captum: seed 0 only)
    if ig_variants:
        for steps in (8,):
            scores[f"faux_ig_mean_{steps}"] = FAuxTester(target, aux, variant="ig", ig_baseline=train_mean,
                                                         ig_steps=steps, output=logit).score(X)
        scores["faux_ig_zeros_32"] = FAuxTester(target, aux, variant="ig", ig_baseline="zeros", output=logit).score(X)
        other = np.empty(len(X))
        for k in (0, 1):
            rows = c == k
            base = train.X[train.c == 1 - k].mean(axis=0)
            other[rows] = FAuxTester(target, aux, variant="ig", ig_baseline=base, output=logit).score(X[rows])
        scores["faux_ig_other_32"] = other

    # ---- RQ4: weakened aux models; bias-0 target recipes
    if rq4:
        rq = []
        for n_rows, epochs in [(n, e) for n in (300, 1000, n_train) for e in (1, 3, 30)]:
            weak = fit_aux(train.X, train.c, seed=seed, epochs=epochs, n_rows=n_rows)
            readings = _readings(gg, weak.jacobian(X), group_logit_gap(weak, train.X, train.c))
            rq.append({"n_rows": n_rows, "epochs": epochs, "aux_auc": float(weak.quality_),
                       "a_norm_p50": float(np.median(weak.jacobian(X)[:, 0].double().norm(dim=1).numpy())),
                       **{k: {**ranking(v, positive), "p90": float(np.nanquantile(v, 0.9)),
                              "flagged": float(np.mean(np.nan_to_num(v, nan=np.inf) > DELTA)),
                              "flagged_tau": float(np.mean(np.nan_to_num(v, nan=np.inf) > TAU))}
                          for k, v in readings.items()}})
        out["rq4"] = rq
        if bias == 0.0:
            recipes = []
            for wd in (1e-4, 1e-3, 1e-2):
                t = train_target(train.X, train.y, seed=seed, weight_decay=wd)
                i = individual_fairness_scores(t, audit, output=logit)
                s = FAuxTester(t, aux, output=logit).score(X)
                with torch.no_grad():
                    auc = float(roc_auc_score(audit.y, t(torch.from_numpy(X))[:, 0].numpy()))
                recipes.append({"weight_decay": wd, "target_auc": auc, "ifs_over_tau": float(np.mean(i > TAU)),
                                "ifs_p90": float(np.quantile(i, 0.9)), "faux_flagged": float(np.mean(s > DELTA)),
                                "faux_group_units_flagged": float(np.mean(s * gap > TAU))})
            out["bias0_recipes"] = recipes

    out["flagged_vs_delta"] = {name: {f"{d:g}": float(np.mean(np.nan_to_num(scores[name], nan=np.inf) > d))
                                      for d in DELTA_GRID}
                               for name in ("faux", "faux_fig1_projection", "lic_ub")}
    for name, s in scores.items():
        thr = threshold(name)
        out["testers"][name] = {**ranking(s, positive), **at_threshold(s, positive, thr), "threshold": thr,
                                "spearman_ifs": _spearman(s, ifs)}
    return out


def threshold(name: str) -> float:
    if name in THRESHOLDS:
        return THRESHOLDS[name]
    if name.startswith("faux_ng"):
        return 0.5
    if name.startswith("faux_group_units"):
        return TAU
    return DELTA if name.startswith("faux") else TAU


def group_logit_gap(aux, X, c) -> float:
    """|mean aux logit of group 1 − of group 0| on the aux's training rows (a global scalar)."""
    import torch

    with torch.no_grad():
        z = aux.net_(torch.from_numpy(X).float())[:, 0].double().numpy()
    return float(abs(z[c == 1].mean() - z[c == 0].mean()))


def _readings(g, J, gap: float) -> dict[str, np.ndarray]:
    """Readings of the k = 1 LIC score from one (g, a) pair (open points 2, 3 and 5)."""
    from faux_checks.method.lic import faux_ng_scores, faux_scores

    a = J[:, 0].double()                                                       # (n, d)
    inner = (g * a).sum(1).abs()                                               # |⟨g, a⟩|
    eq9 = faux_scores(g, J).scores.numpy()
    out = {"faux_eq9": eq9}
    out["faux_group_units"] = eq9 * gap                                        # Δŷ per between-group aux-logit gap
    for lam in (1e-2, 1e-1, 1.0, 10.0):
        out[f"faux_ridge_{lam:g}"] = faux_scores(g, J, ridge=lam).scores.numpy()
    out["faux_ng_cos"] = faux_ng_scores(g, J).scores.numpy()
    out["faux_fig1_product"] = inner.numpy()                                   # small when either gradient is
    out["faux_fig1_projection"] = (inner / a.norm(dim=1).clamp_min(1e-300)).numpy()   # ‖g‖·|cos(g, a)|
    return out


def speed(sources, *, n: int, seed: int = 0, repeats: int = 2) -> dict:
    """CPU seconds per 10,000 individuals of every tester, at bias 0.6, concat (best of ``repeats``)."""
    import torch

    from faux_checks import FAuxTester, TargetOutput
    from faux_checks.baselines import (
        FlipTestTester,
        FTATester,
        UnfairMapTester,
        WeightedFTATester,
        fit_sensitive_subspace,
    )
    from faux_checks.method._batching import as_tensor
    from faux_checks.method.gradients import target_probability_and_gradient
    from faux_checks.method.lic import lic_upper_bound
    from faux_checks.groundtruth.fused import make_fused_data

    logit = TargetOutput(form="logit")
    train = make_fused_data(*sources, n=8000, bias=0.6, fusion="concat", seed=1)
    audit = make_fused_data(*sources, n=n, bias=0.6, fusion="concat", seed=2)
    target = train_target(train.X, train.y, seed=seed)
    aux = fit_aux(train.X, train.c, seed=seed)
    aux_small = fit_aux(train.X, train.c, seed=seed, hidden=(32, 32))
    basis = fit_sensitive_subspace(train.X, train.c)
    X, c = audit.X, audit.c
    n_ig = min(n, 4000)
    jobs = {
        "lic_ub": (lambda: lic_upper_bound(target_probability_and_gradient(target, as_tensor(X), logit)[1],
                                           torch.from_numpy(audit.dx_dc())), n),
        "faux": (lambda: FAuxTester(target, aux, output=logit).score(X), n),
        "faux_aux32": (lambda: FAuxTester(target, aux_small, output=logit).score(X), n),
        "faux_ng": (lambda: FAuxTester(target, aux, variant="ng", output=logit).score(X), n),
        "faux_ig": (lambda: FAuxTester(target, aux, variant="ig", ig_baseline=train.X.mean(0), output=logit).score(X[:n_ig]), n_ig),
        "fta": (lambda: FTATester(target, output=logit).score(X), n),
        "wfta": (lambda: WeightedFTATester(target, basis=basis, output=logit).score(X), n),
        "unfair_map": (lambda: UnfairMapTester(target, basis=basis, output=logit).score(X), n),
        "fliptest": (lambda: FlipTestTester(target, output=logit).score(X, c), n),
        "fliptest_quantile": (lambda: FlipTestTester(target, method="quantile", output=logit).score(X, c), n),
    }
    out = {}
    for name, (fn, rows) in jobs.items():
        best = float("inf")
        for _ in range(repeats):
            t = time.process_time()
            fn()
            best = min(best, time.process_time() - t)
        out[name] = best / rows * 1e4
    return out


def _spearman(a, b) -> float:
    from scipy.stats import spearmanr

    a = np.nan_to_num(np.asarray(a, dtype=np.float64), nan=np.inf)
    r = spearmanr(a, b).statistic
    return float(r) if np.isfinite(r) else float("nan")


# ---------------------------------------------------------------------------- report
def mean_sd(values) -> tuple[float, float]:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    if len(v) == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def fmt(m: float, sd: float | None = None, digits: int = 3) -> str:
    if not np.isfinite(m):
        return "–"
    return f"{m:.{digits}f}" + (f" ± {sd:.{digits}f}" if sd is not None and np.isfinite(sd) and sd > 0 else "")


def collect(cells, fusion, bias, name, key):
    return [cell["testers"][name][key] for cell in cells
            if cell["fusion"] == fusion and cell["bias"] == bias and name in cell["testers"]]


def write_report(all_cells: list[dict], speeds: dict, args, path: Path, png: Path, wall: float) -> None:
    cells = [c for c in all_cells if c.get("dataset", "bank") == "bank"]
    others = [c for c in all_cells if c.get("dataset", "bank") != "bank"]
    if not cells:                                  # a run of another configuration alone
        cells, others = others, []
    fusions = sorted({c["fusion"] for c in cells}, key=FUSIONS.index)
    biases = sorted({c["bias"] for c in cells})
    seeds = sorted({c["seed"] for c in cells})
    names = [n for n in MAIN if any(n in c["testers"] for c in cells)]
    cmd = "python benchmarks/testers.py" + (" --quick" if args.quick else "")
    if others:
        cmd = ("python benchmarks/testers.py --json main.json; python benchmarks/testers.py --no-duration --fusions "
               "concat --speed-n 0 --json other.json; python benchmarks/testers.py --from-json main.json --extra-json "
               "other.json --notes conclusions.md")
    lines = [
        "# Benchmark of individual-fairness testers on fused synthetic data",
        "",
        f"Generated by `{cmd}` (main configuration: {len(cells)} cells, bias × fusion × seeds {seeds}; "
        f"{args.n_train:,} training and "
        f"{args.n_audit:,} audit rows per cell; {wall / 60:.1f} min wall on {args.threads} torch thread(s) of a shared "
        "2-core machine). This is **our reconstruction** of the paper's RQ1/RQ4 set-up: the paper's generator (its "
        "Appendix A.7), metric and tables are not available to us, so these numbers are not comparable with the paper's."
        + (" The sections from 'Conclusions' to 'Goals (summary)' are written by hand from the tables (`--notes`)."
           if args.notes else ""),
        "",
    ]
    if args.notes and Path(args.notes).exists():
        lines += [Path(args.notes).read_text().strip(), ""]
    lines += [
        "## Set-up",
        "",
        "- **Data** (`faux_checks.groundtruth.fused.make_fused_data`): D̂ = UCI Adult `adult.data` (x̂: age, education-num, "
        "log1p capital-gain, log1p capital-loss, hours-per-week; y = income > 50K), D̃ = UCI Bank Marketing (x̃: age, "
        "log1p duration, log1p campaign, previous, emp.var.rate, cons.price.idx, cons.conf.idx, euribor3m; c = "
        "subscribed), both read from `shared/data`. y ~ Bernoulli(½); with probability *bias* c = y, else "
        "c ~ Bernoulli(½), so corr(y, c) = bias; x̃ = h(z̃, c) = μ(c) + σ(c) ⊙ z̃ with D̃'s per-class mean/sd (linear in c, "
        "exact on the real rows, ∂x̃/∂c known). Fusion: `concat` [x̂, x̃] (d = 13) or `outer` vec([x̂,1] ⊗ [x̃,1]) (d = 53).",
        "- **Target**: MLP d-32-32-1 (logit) trained on (x, y) only: Adam, lr 3e-3, 20 epochs, weight decay 1e-3 "
        "(see 'Bias-0 targets' for 1e-4 and 1e-2). **Aux**: `AuxiliaryModel(hidden=(64, 64))` on (x, c) of the same "
        "training rows, logit output.",
        f"- **Ground truth**: IFS = |f(x) − f(x with c swapped, z⊥ = (x̂, z̃) fixed)| (Definition 1). Label: "
        f"**IFS > τ = {TAU}** (the swap moves the target probability by more than 10 points). ROC-AUC and average "
        "precision (AP) of each tester's scores against that label; NaN scores (none occurred) would rank highest. "
        "AP of a random ranking = the share of positives (given in each table).",
        "- **Default thresholds** for precision/recall: fAux δ = 0.05 (policy, Δŷ per unit aux logit), NG 0.5, "
        "FTA 0.5 (policy), Unfair Map loss ratio 2; LIC-UB and FlipTest τ (same unit as IFS); weighted FTA 0.1 "
        "(Δŷ per standardised unit along S; no published default).",
        "- **Baselines**: FTA; weighted FTA with the sensitive subspace of a logistic model of c given x "
        "(`subspace='sensitive'`, default, and the literal `'complement'`); Unfair Map (20 steps, η = 0.1, λ = 1, "
        "labels = the model's decisions); FlipTest with exact OT (`ot.emd`, ≤ 2,000 rows per group) and with the "
        "per-feature quantile map. FTU flip is not run: c is not a target input here, so it would score 0 for "
        "everyone (its tests cover it).",
        "",
    ]
    for fusion in fusions:
        for metric, title in (("ap", "Average precision"), ("auc", "ROC-AUC")):
            lines += [f"## {title} vs bias — fusion `{fusion}` (mean ± sd over seeds)", ""]
            lines.append("| tester | " + " | ".join(f"bias {b:g}" for b in biases) + " |")
            lines.append("|---|" + "---:|" * len(biases))
            for name in names:
                row = [fmt(*mean_sd(collect(cells, fusion, b, name, metric))) for b in biases]
                lines.append(f"| {LABELS.get(name, name)} | " + " | ".join(row) + " |")
            if metric == "ap":
                for label, key in (("share of IFS > τ (random AP)", "positive_rate"), ("aux model AUC (c)", "aux_auc"),
                                   ("target AUC (y)", "target_auc"), ("median IFS", "ifs_p50")):
                    vals = [fmt(*mean_sd([c[key] for c in cells if c["fusion"] == fusion and c["bias"] == b]))
                            for b in biases]
                    lines.append(f"| *{label}* | " + " | ".join(vals) + " |")
            lines.append("")
    lines += ["## Spearman correlation of each score with IFS (mean over cells)", "",
              "| tester | " + " | ".join(f"`{f}`, bias {lo}" for f in fusions for lo in ("< 0.4", "≥ 0.4")) + " |",
              "|---|" + "---:|" * (2 * len(fusions))]
    for name in names:
        row = []
        for fusion in fusions:
            for sel in (lambda b: b < 0.4, lambda b: b >= 0.4):
                row.append(fmt(mean_sd([v for b in biases if sel(b) for v in collect(cells, fusion, b, name, "spearman_ifs")])[0]))
        lines.append(f"| {LABELS.get(name, name)} | " + " | ".join(row) + " |")
    lines.append("")
    for fusion in fusions:
        lines += [f"## Flagged share / precision / recall at the default threshold — `{fusion}` (means over seeds)", ""]
        lines.append("| tester (threshold) | " + " | ".join(f"bias {b:g}" for b in biases) + " |")
        lines.append("|---|" + "---:|" * len(biases))
        for name in names:
            row = []
            for b in biases:
                f_, p_, r_ = (mean_sd(collect(cells, fusion, b, name, k))[0] for k in ("flagged", "precision", "recall"))
                row.append(f"{fmt(f_, digits=2)} / {fmt(p_, digits=2)} / {fmt(r_, digits=2)}")
            lines.append(f"| {LABELS.get(name, name)} ({threshold(name):g}) | " + " | ".join(row) + " |")
        lines.append("")
    if speeds:
        lines += [f"## Cost: CPU seconds per 10,000 individuals (scoring only; bias 0.6, concat, n = {args.speed_n:,}, "
                  "best of 2, 1 thread)", "",
                  "Fitting is not included (per cell: aux model "
                  f"{fmt(mean_sd([c['fit_seconds']['aux'] for c in cells])[0], digits=1)} s, target "
                  f"{fmt(mean_sd([c['fit_seconds']['target'] for c in cells])[0], digits=1)} s wall). "
                  "IG runs on 4,000 rows. `faux_aux32`: fAux with an aux model of the target's size (32, 32) "
                  "instead of (64, 64). FlipTest's cost per individual falls with n (its OT problem is fixed at "
                  "≤ 2,000 rows per group).", "",
                  "| tester | CPU s / 10k | × fAux | × FTA |", "|---|---:|---:|---:|"]
        for name, v in speeds.items():
            lines.append(f"| {LABELS.get(name, name)} | {v:.4f} | {v / speeds['faux']:.1f} | {v / speeds['fta']:.1f} |")
        lines.append("")
    var_names = sorted({n for c in cells for n in c["testers"] if n.startswith("faux")})
    lines += ["## fAux variants (open points 1–4): AP by bias", "",
              "Same target and aux network per cell; only the score differs. `faux_eq9` = eq. 9 from the pure function "
              "(equals `faux`, the tester); `faux_ridge_λ` = |⟨g,a⟩|/(‖a‖²+λ) (logit aux); `faux_prob*`: aux "
              "differentiated in probability space (a_p = p(1−p)·a_logit); `faux_fig1_product` = |⟨g,a⟩| (small when "
              "either gradient is small, the Figure 1 reading); `faux_fig1_projection` = |⟨g,a⟩|/‖a‖ = ‖g‖·|cos(g,a)|; "
              "`faux_ng*` = |cos|; `faux_group_units` = eq. 9 × |mean aux logit of group 1 − of group 0| (training rows): "
              "the same ranking as eq. 9, in Δŷ per between-group gap of the aux logit, thresholded at τ; `faux_ig*`: integrated gradients, baseline `ig` = training mean, `mean_8` = 8 steps, "
              "`zeros`, `other` = the other group's training mean (seed 0 only).", ""]
    for fusion in fusions:
        lines += [f"### `{fusion}`", "",
                  "| variant | " + " | ".join(f"bias {b:g}" for b in biases) + " | mean AP, bias ≥ 0.4 | mean AUC, "
                  "bias ≥ 0.4 | flagged at its threshold, bias 0 |", "|---|" + "---:|" * (len(biases) + 3)]
        for name in var_names:
            row = [fmt(mean_sd(collect(cells, fusion, b, name, "ap"))[0]) for b in biases]
            hi = mean_sd([v for b in biases if b >= 0.4 for v in collect(cells, fusion, b, name, "ap")])[0]
            hi_auc = mean_sd([v for b in biases if b >= 0.4 for v in collect(cells, fusion, b, name, "auc")])[0]
            fl0 = mean_sd(collect(cells, fusion, 0.0, name, "flagged"))[0] if 0.0 in biases else float("nan")
            lines.append(f"| {name} | " + " | ".join(row) + f" | {fmt(hi)} | {fmt(hi_auc)} | {fmt(fl0, digits=3)} |")
        lines.append("")
    stats = [c["aux_stats"] for c in cells]
    undef = sum(c["undefined"]["faux"] + c["undefined"]["faux_prob"] for c in cells)
    lines += [f"Aux model near-certain (p < 0.02 or > 0.98) on {mean_sd([s['share_confident'] for s in stats])[0]:.1%} "
              f"of audit rows; median ‖a‖ (logit) {mean_sd([s['a_logit_norm_p50'] for s in stats])[0]:.2f}; median "
              f"|aux logit change under the c swap| {mean_sd([s['logit_swing_p50'] for s in stats])[0]:.2f} (means over "
              f"cells). Undefined (NaN) scores over all cells, logit and probability aux: {undef}.", ""]
    fv = [c for c in cells if "flagged_vs_delta" in c]
    if fv:
        lines += ["## Flagged fraction vs δ (fusion concat, means over seeds)", "",
                  "Eq. 9 in Δŷ per unit aux logit; ‖g‖·|cos| in Δŷ per unit step along the aux gradient direction "
                  "(standardised features); LIC-UB in Δŷ per unit c, next to the true share of IFS > τ.", ""]
        for name, label in (("faux", "eq. 9"), ("faux_fig1_projection", "‖g‖·|cos|"), ("lic_ub", "LIC-UB")):
            lines += [f"### {label}", "", "| δ | " + " | ".join(f"bias {b:g}" for b in biases) + " |",
                      "|---:|" + "---:|" * len(biases)]
            for d in DELTA_GRID:
                row = [fmt(mean_sd([c["flagged_vs_delta"][name][f"{d:g}"] for c in fv
                                    if c["fusion"] == "concat" and c["bias"] == b])[0]) for b in biases]
                lines.append(f"| {d:g} | " + " | ".join(row) + " |")
            lines.append("")
        lines += ["True share of IFS > τ by bias: " + ", ".join(
            f"{b:g}: {fmt(mean_sd([c['positive_rate'] for c in fv if c['fusion'] == 'concat' and c['bias'] == b])[0])}"
            for b in biases) + ".", ""]
    rq_cells = [c for c in cells if "rq4" in c]
    if rq_cells:
        lines += ["## RQ4: a weakened aux model (fusion concat)", "",
                  "Aux trained on fewer rows / epochs (`AuxiliaryModel` keeps ≥ ~20 optimiser steps per epoch). AP "
                  "against the same ground truth; p90 = 90th percentile of the score; flagged = share of eq. 9 scores "
                  "> δ = 0.05. Means over seeds.", ""]
        keys = (("faux_eq9", "eq. 9"), ("faux_ridge_1", "ridge λ=1"), ("faux_fig1_projection", "‖g‖·|cos|"),
                ("faux_ng_cos", "NG"))
        for b in sorted({c["bias"] for c in rq_cells}):
            lines += [f"### bias {b:g}", "",
                      "| aux rows | epochs | aux AUC | median ‖a‖ | " + " | ".join(f"AP {k}" for _, k in keys)
                      + " | p90 eq. 9 | p90 ridge 1 | p90 ‖g‖·|cos| | flagged eq. 9 (δ) | flagged ridge 1 (δ) | "
                      "flagged group units (τ) |",
                      "|---:|---:|---:|---:|" + "---:|" * (len(keys) + 6)]
            settings = [(r["n_rows"], r["epochs"]) for r in rq_cells[0]["rq4"]]
            for i, (nr, ep) in enumerate(settings):
                rs = [c["rq4"][i] for c in rq_cells if c["bias"] == b]
                m = lambda f: mean_sd([f(r) for r in rs])[0]  # noqa: E731
                lines.append(
                    f"| {nr:,} | {ep} | {fmt(m(lambda r: r['aux_auc']))} | {fmt(m(lambda r: r['a_norm_p50']), digits=2)} | "
                    + " | ".join(fmt(m(lambda r, k=k: r[k]["ap"])) for k, _ in keys)
                    + f" | {fmt(m(lambda r: r['faux_eq9']['p90']))} | {fmt(m(lambda r: r['faux_ridge_1']['p90']))} | "
                    f"{fmt(m(lambda r: r['faux_fig1_projection']['p90']))} | {fmt(m(lambda r: r['faux_eq9']['flagged']))} | "
                    f"{fmt(m(lambda r: r['faux_ridge_1']['flagged']))} | {fmt(m(lambda r: r['faux_group_units']['flagged_tau']))} |")
            lines.append("")
    rec = [c for c in cells if "bias0_recipes" in c]
    if rec:
        lines += ["## Bias-0 targets: how fair is a target trained where y ⟂ c?", "",
                  "Same bias-0 data; only the target's weight decay changes (fusion concat, means over seeds). "
                  "x̃ carries no information about y, so every use of it is noise-fitting.", "",
                  "| weight decay | target AUC | share IFS > τ | IFS p90 | fAux eq. 9 flagged at δ | fAux group units flagged at τ |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for i, r0 in enumerate(rec[0]["bias0_recipes"]):
            rs = [c["bias0_recipes"][i] for c in rec]
            lines.append(f"| {r0['weight_decay']:g} | {fmt(mean_sd([r['target_auc'] for r in rs])[0])} | "
                         f"{fmt(mean_sd([r['ifs_over_tau'] for r in rs])[0])} | {fmt(mean_sd([r['ifs_p90'] for r in rs])[0])} | "
                         f"{fmt(mean_sd([r['faux_flagged'] for r in rs])[0])} | "
                         f"{fmt(mean_sd([r['faux_group_units_flagged'] for r in rs])[0])} |")
        lines.append("")
    lines += ["## Goals", ""]
    for fusion in fusions:
        for b in biases:
            if b < 0.4:
                continue
            fa = mean_sd(collect(cells, fusion, b, "faux", "ap"))[0]
            ub = mean_sd(collect(cells, fusion, b, "lic_ub", "ap"))[0]
            best_name, bb = max(((n, mean_sd(collect(cells, fusion, b, n, "ap"))[0]) for n in BASELINES),
                                key=lambda t: t[1])
            lines.append(f"- `{fusion}`, bias {b:g}: fAux AP {fa:.3f}, LIC-UB {ub:.3f} (gap {ub - fa:+.3f}; ≤ 0.05: "
                         f"{'met' if ub - fa <= 0.05 else 'NOT met'}); best baseline {best_name} {bb:.3f} "
                         f"({'fAux above: met' if fa > bb else 'fAux not above: NOT met'}).")
        if 0.0 in biases:
            fl = mean_sd(collect(cells, fusion, 0.0, "faux", "flagged"))[0]
            lines.append(f"- `{fusion}`, bias 0: fAux flags {fl:.2%} at δ = {DELTA} (≤ 1%: {'met' if fl <= 0.01 else 'NOT met'}).")
    if speeds:
        sp = speeds
        um, ft = sp["unfair_map"] / sp["faux"], sp["fliptest"] / sp["faux"]
        lines.append(f"- Cost: Unfair Map / fAux = {um:.1f}× (≥ 20×: {'met' if um >= 20 else 'NOT met'}), FlipTest (exact) / "
                     f"fAux = {ft:.1f}× (≥ 20×: {'met' if ft >= 20 else 'NOT met'}); "
                     f"fAux / FTA = {sp['faux'] / sp['fta']:.1f}× (≤ 2×: {'met' if sp['faux'] / sp['fta'] <= 2 else 'NOT met'}; "
                     f"{sp['faux_aux32'] / sp['fta']:.1f}× with a (32, 32) aux).")
    lines += ["", f"![AP vs bias]({png.name})", ""]
    if others:
        lines += _robustness_section(others)
    path.write_text("\n".join(lines))
    plot(cells, fusions, biases, names, png)


def _robustness_section(cells: list[dict]) -> list[str]:
    """Compact AP / ROC-AUC tables and goal lines for another data configuration."""
    out = []
    for dataset in sorted({c["dataset"] for c in cells}):
        sub = [c for c in cells if c["dataset"] == dataset]
        fusions = sorted({c["fusion"] for c in sub}, key=FUSIONS.index)
        biases = sorted({c["bias"] for c in sub})
        seeds = sorted({c["seed"] for c in sub})
        names = [n for n in MAIN if any(n in c["testers"] for c in sub)] + [
            "faux_ridge_1", "faux_ridge_10", "faux_fig1_product", "faux_fig1_projection", "faux_prob"]
        out += [f"## Robustness: configuration `{dataset}` (seeds {seeds})", "",
                "Same set-up with Bank's call duration removed from x̃ (the UCI notes call it a leak: it is known only "
                "after the call). The c signal in x̃ is weaker, so the target leans more on the legitimate block x̂ "
                "and the share of unfair individuals is lower: the configuration where a tester must tell c-driven "
                "from legitimate sensitivity.", ""]
        for fusion in fusions:
            for metric, title in (("ap", "AP"), ("auc", "ROC-AUC")):
                out += [f"### {title} — `{fusion}`", "",
                        "| tester | " + " | ".join(f"bias {b:g}" for b in biases) + " |", "|---|" + "---:|" * len(biases)]
                for name in names:
                    row = [fmt(*mean_sd(collect(sub, fusion, b, name, metric))) for b in biases]
                    out.append(f"| {LABELS.get(name, name)} | " + " | ".join(row) + " |")
                if metric == "ap":
                    for label, key in (("share of IFS > τ (random AP)", "positive_rate"), ("aux model AUC (c)", "aux_auc"),
                                       ("target AUC (y)", "target_auc")):
                        vals = [fmt(*mean_sd([c[key] for c in sub if c["fusion"] == fusion and c["bias"] == b]))
                                for b in biases]
                        out.append(f"| *{label}* | " + " | ".join(vals) + " |")
                out.append("")
            for b in biases:
                if b < 0.4:
                    continue
                fa = mean_sd(collect(sub, fusion, b, "faux", "ap"))[0]
                ub = mean_sd(collect(sub, fusion, b, "lic_ub", "ap"))[0]
                best_name, bb = max(((n, mean_sd(collect(sub, fusion, b, n, "ap"))[0]) for n in BASELINES),
                                    key=lambda t: t[1])
                out.append(f"- `{fusion}`, bias {b:g}: fAux AP {fa:.3f}, LIC-UB {ub:.3f} (gap {ub - fa:+.3f}); best "
                           f"baseline {best_name} {bb:.3f}.")
            if 0.0 in biases:
                fl = mean_sd(collect(sub, fusion, 0.0, "faux", "flagged"))[0]
                out.append(f"- `{fusion}`, bias 0: fAux flags {fl:.2%} at δ = {DELTA}.")
            out.append("")
    return out


def plot(cells, fusions, biases, names, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(fusions), figsize=(6 * len(fusions), 4.2), squeeze=False)
    for ax, fusion in zip(axes[0], fusions):
        for name in names:
            if name == "ftu_flip":
                continue
            m = [mean_sd(collect(cells, fusion, b, name, "ap"))[0] for b in biases]
            style = "-" if name.startswith(("faux", "lic")) else "--"
            ax.plot(biases, m, style, marker="o", ms=3, label=LABELS.get(name, name))
        pos = [mean_sd([c["positive_rate"] for c in cells if c["fusion"] == fusion and c["bias"] == b])[0] for b in biases]
        ax.plot(biases, pos, ":", color="grey", label="share of positives (random AP)")
        ax.set_title(f"fusion: {fusion}")
        ax.set_xlabel("bias level")
        ax.set_ylabel(f"average precision (IFS > {TAU})")
        ax.set_ylim(0, 1.02)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="bias {0, 0.6, 1}, concat, 1 seed (< 3 minutes)")
    ap.add_argument("--no-duration", action="store_true",
                    help="drop Bank's call duration from x̃ (a weaker c signal: the robustness configuration)")
    ap.add_argument("--fusions", nargs="+", default=None, choices=FUSIONS, help="default: both (quick: concat)")
    ap.add_argument("--extra-json", type=Path, nargs="*", default=(),
                    help="with --from-json: --json files of other configurations to report in their own section")
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per cell (default 3; quick 1)")
    ap.add_argument("--n-train", type=int, default=8000)
    ap.add_argument("--n-audit", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None,
                    help="report path (default docs/benchmark.md; --quick: a temporary folder, never the committed report)")
    ap.add_argument("--json", type=Path, default=None, help="also write every cell's numbers here")
    ap.add_argument("--notes", type=Path, default=None, help="markdown appended to the report (decisions)")
    ap.add_argument("--speed-n", type=int, default=None, help="rows of the cost measurement (default 40,000; quick 10,000)")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="rewrite the report from a --json file of an earlier run (no computation)")
    args = ap.parse_args(argv)
    if args.out is None:
        if args.quick:
            import tempfile

            args.out = Path(tempfile.mkdtemp(prefix="faux-bench-")) / "benchmark_quick.md"
        else:
            args.out = ROOT / "docs" / "benchmark.md"
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        for k, v in saved["args"].items():
            if k not in ("out", "notes", "json", "from_json", "extra_json"):
                setattr(args, k, v)
        extra = [c for f in args.extra_json for c in json.loads(Path(f).read_text())["cells"]]
        write_report(saved["cells"] + extra, saved["speed"], args, args.out, args.out.with_suffix(".png"), saved["wall"])
        return _last_line(saved["cells"])
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    sources = load_sources(args.data_dir)
    dataset = "bank"
    if args.no_duration:
        sources = (sources[0], sources[1], sources[2].drop(columns=["log_duration"]), sources[3])
        dataset = "bank-no-duration"
    fusions = args.fusions or (["concat"] if args.quick else list(FUSIONS))
    if args.quick:
        grid = [(b, f) for f in fusions for b in (0.0, 0.6, 1.0)]
        seeds = list(range(args.seeds or 1))
    else:
        grid = [(b, f) for f in fusions for b in BIASES]
        seeds = list(range(args.seeds or 3))
    cells = []
    for seed in seeds:
        for bias, fusion in grid:
            main_data = dataset == "bank"
            rq4 = main_data and fusion == "concat" and bias in (0.0, 0.6)
            cell = run_cell(sources, bias=bias, fusion=fusion, seed=seed, n_train=args.n_train, n_audit=args.n_audit,
                            ig_variants=main_data and seed == 0 and not args.quick, rq4=rq4)
            cell["dataset"] = dataset
            cells.append(cell)
            t = cell["testers"]
            print(f"[{time.perf_counter() - t0:6.0f}s] bias={bias:g} {fusion} seed={seed} pos={cell['positive_rate']:.2f} "
                  f"aux_auc={cell['aux_auc']:.3f} AP: faux={t['faux']['ap']:.3f} ub={t['lic_ub']['ap']:.3f} "
                  f"ng={t['faux_ng']['ap']:.3f} wfta={t['wfta']['ap']:.3f} um={t['unfair_map']['ap']:.3f} "
                  f"flip={t['fliptest']['ap']:.3f} fta={t['fta']['ap']:.3f}", flush=True)
    args.speed_n = (10_000 if args.quick else 40_000) if args.speed_n is None else args.speed_n
    speeds = speed(sources, n=args.speed_n) if args.speed_n else {}
    if speeds:
        print("cost (CPU s / 10k): " + ", ".join(f"{k}={v:.4f}" for k, v in speeds.items()), flush=True)
    wall = time.perf_counter() - t0
    png = args.out.with_suffix(".png")
    if args.json:
        saved_args = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        args.json.write_text(json.dumps({"cells": cells, "speed": speeds, "wall": wall, "args": saved_args},
                                        indent=1, default=float))
    write_report(cells, speeds, args, args.out, png, wall)
    print(f"report: {args.out} ({wall:.0f} s)")
    return _last_line(cells)


def _last_line(cells) -> int:
    key = [c for c in cells if c["bias"] == 0.6 and c["fusion"] == "concat"]
    fa = mean_sd([c["testers"]["faux"]["ap"] for c in key])[0]
    ub = mean_sd([c["testers"]["lic_ub"]["ap"] for c in key])[0]
    bb = max(mean_sd([c["testers"][n]["ap"] for c in key])[0] for n in BASELINES)
    print(f"faux_ap={fa:.3f} lic_ub_ap={ub:.3f} best_baseline_ap={bb:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
