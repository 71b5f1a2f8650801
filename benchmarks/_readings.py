"""The readings the tester benchmark compares, each run on a :class:`_cells.Cell`.

Library readings (``faux_checks``): eq. 9 as printed (``eq9``: Δŷ per unit of aux log-odds, not
probability points) and the swap reading with its options. Benchmark-only readings built from the
library's pieces: ``swap_sample`` (categorical levels drawn from the moved one-hot mass; the score
is the expected |Δŷ| and the flag the probability that |Δŷ| > δ) and ``swap_ensemble`` (three aux
seeds averaged). Baselines: FTA, weighted FTA, Unfair Map, FlipTest; LIC-UB on fused data.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

#: name -> (label, swap options). Every swap reading runs with the family's admissible declaration
#: ("declared") and without ("none"); both hold fixed the features that tell the aux model nothing about c
#: on its held-out rows (the library default), except ``swap_nohold``.
SWAP_READINGS = {
    "swap": ("swap: covariance metric, 1 step, finite (candidate default)", {}),
    "swap_nohold": ("swap without holding uninformative features", {"hold": False}),
    "swap_first": ("swap, first-order ∇f·Δx", {"evaluation": "first_order"}),
    "swap_path3": ("swap, 3 Newton steps (finite path)", {"steps": 3}),
    "swap_search": ("swap, 2 secant iterations along the step (aux output reaches the matched value)",
                    {"line_search": 2}),
    "swap_snap": ("swap, categorical snap (discrete swap)", {"categorical": "snap"}),
    "swap_diag": ("swap, diagonal metric (standardised Euclidean)", {"metric": "diagonal"}),
    "first_order_euclid": ("first-order swap: eq. 9 × matched Δv (Euclidean J⁺)", {"metric": "euclidean",
                                                                                  "evaluation": "first_order"}),
    "path_euclid": ("finite path along J⁺ (Euclidean, 3 steps)", {"metric": "euclidean", "steps": 3}),
}
EXTRA_READINGS = {
    "swap_sample": "swap, categorical levels sampled (expected flag), 16 draws",
    "swap_ensemble": "swap with an ensemble of 3 aux seeds",
}
BASELINES = {
    "fta": "FTA ‖∇f‖₂",
    "wfta": "weighted FTA ‖P_S ∇f‖₂",
    "unfair_map": "Unfair Map loss ratio",
    "fliptest": "FlipTest (exact OT, ≤1,500/group)",
}
OTHER = {"eq9": "fAux eq. 9 as printed (Δŷ per aux logit)", "lic_ub": "LIC-UB (true ∂x/∂c; oracle, fused only)"}
LABELS = {**{k: v[0] for k, v in SWAP_READINGS.items()}, **EXTRA_READINGS, **BASELINES, **OTHER}


class _Mean(nn.Module):
    def __init__(self, nets):
        super().__init__()
        self.nets = nn.ModuleList(nets)

    def forward(self, x):
        return torch.stack([net(x) for net in self.nets]).mean(dim=0)


def feature_groups(cell) -> list[np.ndarray]:
    """One group per source column in the aux input space: one-hot blocks, and every other feature alone."""
    d = cell.X_ref.shape[1]
    covered = np.zeros(d, dtype=bool)
    for g in cell.groups:
        covered[g] = True
    return [np.asarray(g) for g in cell.groups] + [np.array([j]) for j in np.flatnonzero(~covered)]


def _tester(cell, aux, *, admissible, options):
    from faux_checks import FAuxTester, TargetOutput
    from faux_checks.method.counterfactual import SwapSettings

    options = dict(options)
    metric = options.pop("metric", "covariance")
    hold = options.pop("hold", True)
    settings = SwapSettings(categorical_groups=cell.groups, **options)
    tester = FAuxTester(cell.target, aux, variant="swap", output=TargetOutput("logit"), swap=settings,
                        protected_mask=None if cell.keep.all() else ~cell.keep, direct_levels=cell.direct_levels)
    holdout = None
    rows = getattr(aux, "holdout_rows_", None)
    if hold and rows is not None and len(rows):
        holdout = (cell.X_ref[rows], cell.c_ref[rows])
    return tester.fit_reference(cell.X_ref, cell.c_ref, admissible=admissible, metric=metric, holdout=holdout,
                                feature_groups=feature_groups(cell))


def swap_scores(cell, name: str, *, declared: bool) -> np.ndarray:
    """Scores of one library swap reading (probability points), NaN where undefined."""
    admissible = cell.admissible if declared else None
    return _tester(cell, cell.aux, admissible=admissible, options=SWAP_READINGS[name][1]).score(cell.X, cell.c)


def ensemble_scores(cell, *, declared: bool, seeds=(1, 2)) -> np.ndarray:
    from faux_checks import AuxiliaryModel

    nets = [cell.aux.net_] + [AuxiliaryModel(kind=cell.kind, seed=100 + s).fit(cell.X_ref, cell.c_ref).net_
                              for s in seeds]
    aux = AuxiliaryModel.from_module(_Mean(nets).eval(), kind=cell.kind, n_features=cell.X_ref.shape[1])
    aux.holdout_rows_ = cell.aux.holdout_rows_        # the first model's held-out rows (the others trained on some)
    return _tester(cell, aux, admissible=cell.admissible if declared else None, options={}).score(cell.X, cell.c)


def sampled_scores(cell, *, declared: bool, deltas=(0.05, 0.1), draws: int = 16, seed: int = 0):
    """Expected |Δŷ| and, per δ, the probability that |Δŷ| > δ, one-hot levels drawn from the moved mass."""
    from faux_checks.method.counterfactual import counterfactual_inputs
    from faux_checks.method.output import TargetOutput, predict_probability

    tester = _tester(cell, cell.aux, admissible=cell.admissible if declared else None, options={})
    logit = TargetOutput("logit")
    X = torch.as_tensor(cell.X)
    p0 = predict_probability(cell.target, X, logit)
    gen = torch.Generator().manual_seed(seed)
    positions = np.flatnonzero(cell.keep)
    groups = [positions[g] for g in cell.groups]                         # in the target's feature space
    best_mean = np.zeros(len(X))
    best_p = {d: np.zeros(len(X)) for d in deltas}
    for _, x1, undefined in counterfactual_inputs(cell.aux.net_, X, cell.c, reference=tester.reference,
                                                  keep=cell.keep, direct_levels=cell.direct_levels):
        weights = []
        for idx in groups:
            w = x1[:, idx].clamp_min(0)
            weights.append(w / w.sum(dim=1, keepdim=True).clamp_min(1e-12))
        total, hits = np.zeros(len(X)), {d: np.zeros(len(X)) for d in deltas}
        for _ in range(draws if groups else 1):
            xs = x1.clone()
            for idx, w in zip(groups, weights):
                level = torch.multinomial(w.float(), 1, generator=gen)[:, 0]
                hot = torch.zeros_like(w)
                hot[torch.arange(len(w)), level] = 1.0
                xs[:, idx] = hot
            change = np.abs(predict_probability(cell.target, xs.float(), logit) - p0)
            total += change
            for d in deltas:
                hits[d] += change > d
        n_draws = draws if groups else 1
        best_mean = np.maximum(best_mean, np.where(undefined, np.nan, total / n_draws))
        for d in deltas:
            best_p[d] = np.maximum(best_p[d], hits[d] / n_draws)
    return best_mean, best_p


def eq9_scores(cell) -> np.ndarray:
    from faux_checks import FAuxTester, TargetOutput

    direct = None
    if not cell.keep.all():
        direct = (cell.direct_levels[1] - cell.direct_levels[0])[:, None]
        D = np.zeros((cell.X.shape[1], 1))
        D[~cell.keep] = direct
        direct = D
    tester = FAuxTester(cell.target, cell.aux, variant="faux", output=TargetOutput("logit"),
                        protected_mask=None if cell.keep.all() else ~cell.keep, dx_dc_direct=direct)
    return tester.score(cell.X)


def baseline_scores(cell) -> dict[str, np.ndarray]:
    from faux_checks import TargetOutput
    from faux_checks.baselines import FlipTestTester, FTATester, UnfairMapTester, WeightedFTATester, fit_sensitive_subspace

    logit = TargetOutput("logit")
    out = {"fta": FTATester(cell.target, output=logit).score(cell.X)}
    sub = fit_sensitive_subspace(cell.X_ref, cell.c_ref, kind=cell.kind)     # (d_aux, r)
    basis = np.zeros((cell.X.shape[1], sub.shape[1]))
    basis[cell.keep] = sub                                                      # c's own columns: not in S
    out["wfta"] = WeightedFTATester(cell.target, basis=basis, output=logit).score(cell.X)
    out["unfair_map"] = UnfairMapTester(cell.target, basis=basis, output=logit).score(cell.X)
    if cell.kind != "continuous":
        out["fliptest"] = FlipTestTester(cell.target, output=logit, seed=0, max_n=1500).score(cell.X, cell.c)
    return out


def lic_ub_scores(cell) -> np.ndarray:
    from faux_checks import TargetOutput
    from faux_checks.method.gradients import target_probability_and_gradient
    from faux_checks.method.lic import lic_upper_bound

    _, g = target_probability_and_gradient(cell.target, torch.as_tensor(cell.X), TargetOutput("logit"))
    return lic_upper_bound(g, torch.from_numpy(cell.dx_dc)).numpy()


def all_readings(cell, *, quick: bool = False) -> dict:
    """Every reading on one cell: {name: scores} plus {"swap_sample/<declared>": (mean, {δ: P})}."""
    out: dict = {"eq9": eq9_scores(cell)}
    names = ["swap", "swap_search", "first_order_euclid", "path_euclid"] if quick else list(SWAP_READINGS)
    for declared in (True, False):
        tag = "declared" if declared else "none"
        for name in names:
            out[f"{name}/{tag}"] = swap_scores(cell, name, declared=declared)
        if not quick:
            out[f"swap_sample/{tag}"] = sampled_scores(cell, declared=declared)
    if not quick:
        out["swap_ensemble/declared"] = ensemble_scores(cell, declared=True)
    out.update(baseline_scores(cell))
    if cell.dx_dc is not None:
        out["lic_ub"] = lic_ub_scores(cell)
    return out
