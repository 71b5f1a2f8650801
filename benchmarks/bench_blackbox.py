"""Forward-only targets: ground-truth ranking of an XGBoost target against an MLP, and the XGBoost scoring cost.

Two measurements (docs/using.md, "Gating other kinds of model", benchmarks/README.md):

1. **Ranking** (``--part ap``): proxy injection (:mod:`faux_checks.groundtruth.proxy`) on the bundled UCI
   Adult rows, binary c, label bias ``--bias``. An MLP (PyTorch) and an XGBoost model are trained on the
   same encoded rows and labels; one auxiliary model and one swap reference (admissible = the legitimate
   block, as in docs/benchmark.md) serve both. For each target, the truly unfair individuals are those
   whose true IFS (exact counterfactual, same noise) exceeds δ = 0.1; the swap score ranks them, and we
   report the average precision (AP) of that ranking, the flagged fraction and the true fraction, per seed.
2. **Finite-difference step** (``--part step``): eq. 9 (``variant = "faux"``) on the XGBoost target by
   central finite differences along J⁺, per step: AP, and the share of rows scored 0 only because no split
   was crossed.
3. **Cost** (``--part cost``): swap-scoring rows/s of a 300-tree XGBoost target (the gate's default reading,
   no evidence / with the forward-only evidence) and the ratio to its plain predictions on the same rows.

Run: ``.venv/bin/python benchmarks/bench_blackbox.py [--part ap|step|cost|all] [--seeds 0 1 2]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

DELTA = 0.1


def proxy_targets(*, seed: int, bias: float = 0.5, n_train: int = 8000, n_audit: int = 3000, trees: int = 200,
                  depth: int = 5, mlp_epochs: int = 20):
    """Proxy-injection data on Adult rows, an MLP and an XGBoost target trained on the same rows, one aux model.

    Returns a dict: spec, X_train, c_train, X_audit, c_audit, audit (ProxyData), admissible (d,) bool,
    mlp (torch module, one logit), xgb (ForwardOnlyTarget), aux (AuxiliaryModel).
    """
    import xgboost as xgb

    from faux_checks import AuxiliaryModel, FeatureSpec
    from faux_checks.groundtruth.proxy import PROXY_COLUMNS, make_proxy_data
    from faux_checks.inputs.datasets import load_adult
    from faux_checks.method.forward import ForwardOnlyTarget

    adult = load_adult(drop_missing=True)
    legit = adult[["age", "workclass", "education-num", "marital-status", "occupation", "relationship", "race",
                   "capital-gain", "capital-loss", "hours-per-week"]].copy()
    legit["capital-gain"] = np.log1p(legit["capital-gain"])
    legit["capital-loss"] = np.log1p(legit["capital-loss"])
    y = adult["income"].to_numpy().astype(np.int64)                  # 1: >50K
    rows = np.random.default_rng(seed).choice(len(legit), n_train + n_audit, replace=False)
    data = make_proxy_data(legit.iloc[rows], y[rows], legit_column="hours-per-week", bias=bias, seed=seed)
    train, audit = data.subset(np.arange(n_train)), data.subset(np.arange(n_train, n_train + n_audit))
    frame = data.frame()                      # the encoding only: levels rare in the training rows stay known
    spec = FeatureSpec.fit(frame, list(frame.columns), min_frequency=50)
    X_train, X_audit = spec.encode(train.frame()), spec.encode(audit.frame())

    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        mlp = torch.nn.Sequential(torch.nn.Linear(X_train.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                  torch.nn.ReLU(), torch.nn.Linear(64, 1))
    Xt, yt = torch.as_tensor(X_train), torch.as_tensor(train.y, dtype=torch.float32)
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    for _ in range(mlp_epochs):
        perm = torch.randperm(len(Xt), generator=gen)
        for start in range(0, len(Xt), 256):
            idx = perm[start:start + 256]
            opt.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(mlp(Xt[idx])[:, 0], yt[idx]).backward()
            opt.step()
    mlp.eval()
    for p in mlp.parameters():
        p.requires_grad_(False)

    booster = xgb.train({"objective": "binary:logistic", "max_depth": depth, "eta": 0.1, "seed": seed,
                         "nthread": 1}, xgb.DMatrix(X_train, label=train.y), num_boost_round=trees)
    target = ForwardOnlyTarget(lambda x: booster.inplace_predict(x, predict_type="margin"),
                               access="forward (xgboost)", output_form="logit", n_features=X_train.shape[1])
    aux = AuxiliaryModel(kind="binary", seed=seed).fit(X_train, train.c)
    proxy_features = np.isin(spec.feature_to_column(), [spec.source_columns.index(p) for p in PROXY_COLUMNS])
    return {"spec": spec, "X_train": X_train, "c_train": train.c, "X_audit": X_audit, "c_audit": audit.c,
            "audit": audit, "admissible": ~proxy_features, "mlp": mlp, "xgb": target, "aux": aux,
            "booster": booster}


def swap_tester(target, cell, output, categorical: str = "soft"):
    """The gate's default reading (swap, covariance metric, uninformative features held) for ``target``;
    ``categorical="snap"``: one-hot groups snap to their largest entry (the setting for tree targets)."""
    from faux_checks import FAuxTester
    from faux_checks.method.counterfactual import SwapSettings

    aux = cell["aux"]
    groups = _one_hot_groups(cell["spec"])
    tester = FAuxTester(target, aux, variant="swap", output=output,
                        swap=SwapSettings(categorical=categorical, categorical_groups=groups))
    hold = getattr(aux, "holdout_rows_", None)
    holdout = (cell["X_train"][hold], cell["c_train"][hold]) if hold is not None and len(hold) else None
    return tester.fit_reference(cell["X_train"], cell["c_train"], admissible=cell["admissible"], holdout=holdout)


def _one_hot_groups(spec) -> list[np.ndarray]:
    out, j = [], 0
    for enc in spec.columns:
        if enc.kind == "categorical":
            out.append(np.arange(j, j + enc.width))
        j += enc.width
    return out


def ranking(cell) -> dict:
    """AP of the swap score against the truly unfair (true IFS > δ), per target; flagged and true fractions."""
    from sklearn.metrics import average_precision_score

    from faux_checks.groundtruth.proxy import proxy_fairness_scores
    from faux_checks.method.output import TargetOutput, predict_probability

    out = {}
    logit = TargetOutput("logit")
    for name, target_name, categorical in (("mlp", "mlp", "soft"), ("xgb", "xgb", "soft"), ("xgb_snap", "xgb", "snap")):
        target = cell[target_name]
        truth = proxy_fairness_scores(lambda f, target=target: predict_probability(target, cell["spec"].encode(f), logit), cell["audit"])
        scores = swap_tester(target, cell, logit, categorical).score(cell["X_audit"], cell["c_audit"])
        unfair = truth > DELTA
        defined = np.isfinite(scores)
        out[name] = {"ap": float(average_precision_score(unfair[defined], scores[defined])),
                     "true_fraction": float(unfair.mean()), "flagged_fraction": float(np.mean(np.nan_to_num(scores, nan=1) > DELTA)),
                     "undefined": int((~defined).sum())}
    return out


def fd_steps(cell, steps=(0.03, 0.1, 0.3, 1.0)) -> list[dict]:
    """Eq. 9 by central finite differences on the XGBoost target, per step: AP against the truly unfair, and the
    share of rows scored 0 only because no split was crossed within ± the step (the swap score for reference)."""
    from sklearn.metrics import average_precision_score

    from faux_checks import FAuxTester
    from faux_checks.groundtruth.proxy import proxy_fairness_scores
    from faux_checks.method.output import TargetOutput, predict_probability

    logit, target = TargetOutput("logit"), cell["xgb"]
    truth = proxy_fairness_scores(lambda f: predict_probability(target, cell["spec"].encode(f), logit), cell["audit"])
    unfair = truth > DELTA
    rows = []
    for step in steps:
        res = FAuxTester(target, cell["aux"], variant="faux", output=logit, fd_step=step).evaluate(
            cell["X_audit"], evidence=False)
        ok = np.isfinite(res.scores)
        rows.append({"step": step, "ap": float(average_precision_score(unfair[ok], res.scores[ok])),
                     "no_split_crossed": float(res.no_split_crossed.mean())})
    return rows


def cost(*, seed: int = 0, n_rows: int = 15_000, trees: int = 300, repeats: int = 3) -> dict:
    """Rows/s of swap scoring a 300-tree XGBoost target, and the ratio to its plain predictions on the same rows."""
    from faux_checks.method.output import TargetOutput, predict_probability

    cell = proxy_targets(seed=seed, n_train=8000, n_audit=n_rows, trees=trees, depth=6, mlp_epochs=1)
    target, X, c = cell["xgb"], torch.as_tensor(cell["X_audit"]), cell["c_audit"]
    logit = TargetOutput("logit")
    tester = swap_tester(target, cell, logit)

    def best(fn):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    t_pred = best(lambda: predict_probability(target, X, logit))
    t_swap = best(lambda: tester.evaluate(X, c, evidence=False))
    t_ev = best(lambda: tester.evaluate(X, c, evidence=True))
    return {"rows": n_rows, "trees": trees, "features": X.shape[1], "threads": torch.get_num_threads(),
            "predict_rows_per_s": n_rows / t_pred, "swap_rows_per_s": n_rows / t_swap,
            "swap_ratio_to_predict": t_swap / t_pred, "swap_evidence_rows_per_s": n_rows / t_ev,
            "swap_evidence_ratio_to_predict": t_ev / t_pred}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["ap", "step", "cost", "all"], default="all")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--bias", type=float, default=0.5)
    args = parser.parse_args()
    if args.part in ("ap", "all"):
        print("seed | target | AP    | true >δ | flagged | undefined")
        for seed in args.seeds:
            res = ranking(proxy_targets(seed=seed, bias=args.bias))
            for name, r in res.items():
                print(f"{seed:4d} | {name:6s} | {r['ap']:.3f} | {r['true_fraction']:.3f}   | {r['flagged_fraction']:.3f}   "
                      f"| {r['undefined']}")
            print(f"     | AP difference xgb − mlp: {res['xgb']['ap'] - res['mlp']['ap']:+.3f}; "
                  f"xgb_snap − mlp: {res['xgb_snap']['ap'] - res['mlp']['ap']:+.3f}")
    if args.part in ("step", "all"):
        print("eq. 9 on the XGBoost target by finite differences (seed 0): step | AP | scored 0, no split crossed")
        for r in fd_steps(proxy_targets(seed=args.seeds[0], bias=args.bias)):
            print(f"  {r['step']:<5g} | {r['ap']:.3f} | {r['no_split_crossed']:.1%}")
    if args.part in ("cost", "all"):
        r = cost()
        print(f"XGBoost {r['trees']} trees, {r['rows']:,} rows × {r['features']} features, torch threads {r['threads']}:")
        print(f"  plain predictions      {r['predict_rows_per_s']:>12,.0f} rows/s")
        print(f"  swap score             {r['swap_rows_per_s']:>12,.0f} rows/s  ({r['swap_ratio_to_predict']:.1f}× predict)")
        print(f"  swap score + evidence  {r['swap_evidence_rows_per_s']:>12,.0f} rows/s  "
              f"({r['swap_evidence_ratio_to_predict']:.1f}× predict)")


if __name__ == "__main__":
    main()
