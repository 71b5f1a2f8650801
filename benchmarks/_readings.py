"""The readings the tester benchmark compares, each run on a :class:`_cells.Cell`.

Library readings (``faux_checks``): eq. 9 as printed (``eq9``: Δŷ per unit of aux log-odds, not
probability points) and the swap reading with its options (the second round's candidates;
benchmark_notes.md). A coupled reading's score is the expected |Δŷ| over level configurations and its
flag a probability. Baselines: FTA, weighted FTA, Unfair Map, FlipTest; LIC-UB on fused data.
"""

from __future__ import annotations

import numpy as np
import torch

#: name -> (label, options). Every reading runs with the family's admissible declaration ("declared") and without
#: ("none"); each option is explicit (SwapSettings fields, and metric / hold / hold_independent / guard /
#: continuous_matching for the reference). ``swap`` is the first round's reading.
_OLD = {"categorical": "soft", "line_search": 0, "continuous_matching": "slope", "hold_independent": False}
_COUPLED = {"categorical": "coupled", "line_search": 2, "continuous_matching": "rank", "hold_independent": True}
SWAP_READINGS = {
    "swap": ("swap, the first round's reading (covariance, soft one-hot move, one linear step)", _OLD),
    "swap_search": ("swap + 2 secant iterations of the line search", {**_OLD, "line_search": 2}),
    "swap_indep": ("swap + search + columns independent of c held", {**_OLD, "line_search": 2, "hold_independent": True}),
    "coupled": ("coupled: + level switches by the level model (auto coupling) + rank matching (candidate)", _COUPLED),
    "coupled_gumbel": ("coupled, Gumbel-max coupling for every c", {**_COUPLED, "coupling": "gumbel"}),
    "coupled_comonotone": ("coupled, comonotone coupling for every c", {**_COUPLED, "coupling": "comonotone"}),
    "coupled_noindep": ("coupled without the independence hold", {**_COUPLED, "hold_independent": False}),
    "coupled_explained": ("coupled, metric: covariance c explains given A, guard 0.1",
                          {**_COUPLED, "metric": "explained", "guard": 0.1}),
    "coupled_between": ("coupled, metric: covariance c explains (not given A), guard 0.1",
                        {**_COUPLED, "metric": "between", "guard": 0.1}),
    "coupled_within": ("coupled, metric: within-group covariance given A", {**_COUPLED, "metric": "within"}),
    "coupled_slope": ("coupled, one global slope for a continuous c", {**_COUPLED, "continuous_matching": "slope"}),
    "coupled_matched": ("coupled, each free numeric column moved to its matched value (amendment 2)",
                        {**_COUPLED, "metric": "matched"}),
    "coupled_matched_comonotone": ("coupled_matched with the comonotone coupling for every c (amendment 2)",
                                   {**_COUPLED, "metric": "matched", "coupling": "comonotone"}),
}
QUICK = ("swap", "coupled_matched")
BASELINES = {
    "fta": "FTA ‖∇f‖₂",
    "wfta": "weighted FTA ‖P_S ∇f‖₂",
    "unfair_map": "Unfair Map loss ratio",
    "fliptest": "FlipTest (exact OT, ≤1,500/group)",
}
OTHER = {"eq9": "fAux eq. 9 as printed (Δŷ per aux logit)", "lic_ub": "LIC-UB (true ∂x/∂c; oracle, fused only)"}
LABELS = {**{k: v[0] for k, v in SWAP_READINGS.items()}, **BASELINES, **OTHER}


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
    guard = options.pop("guard", 0.0)
    matching = options.pop("continuous_matching", "slope")
    independent = options.pop("hold_independent", False)
    settings = SwapSettings(categorical_groups=cell.groups, **options)
    tester = FAuxTester(cell.target, aux, variant="swap", output=TargetOutput("logit"), swap=settings,
                        protected_mask=None if cell.keep.all() else ~cell.keep, direct_levels=cell.direct_levels)
    holdout = None
    rows = getattr(aux, "holdout_rows_", None)
    if hold and rows is not None and len(rows):
        holdout = (cell.X_ref[rows], cell.c_ref[rows])
    return tester.fit_reference(cell.X_ref, cell.c_ref, admissible=admissible, metric=metric, holdout=holdout,
                                feature_groups=feature_groups(cell), guard=guard, continuous_matching=matching,
                                hold_independent=independent)


def swap_scores(cell, name: str, *, declared: bool, deltas=(0.05, 0.1)):
    """One library swap reading: scores (probability points, NaN where undefined), or for a coupled reading
    (expected |Δŷ|, {δ: P(|Δŷ| > δ), undefined rows 1}, {δ: the per-person ranking score at δ})."""
    options = SWAP_READINGS[name][1]
    tester = _tester(cell, cell.aux, admissible=cell.admissible if declared else None, options=options)
    lic = tester.evaluate(cell.X, cell.c, evidence=False)
    if lic.outcomes is None:
        return lic.scores
    return lic.scores, {d: lic.decision_weights(d) for d in deltas}, {d: lic.ranking_score(d) for d in deltas}


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


def all_readings(cell, *, quick: bool = False, only=None) -> dict:
    """Every reading on one cell: {name: scores or (expected |Δŷ|, {δ: flag probability})}.

    ``only``: just these swap readings (no eq. 9, baselines or LIC-UB: runs merged into earlier runs of the same
    cells, ``testers.py --extra-json``).
    """
    out: dict = {} if only else {"eq9": eq9_scores(cell)}
    for declared in (True, False):
        tag = "declared" if declared else "none"
        for name in (only or (QUICK if quick else SWAP_READINGS)):
            out[f"{name}/{tag}"] = swap_scores(cell, name, declared=declared)
    if only:
        return out
    out.update(baseline_scores(cell))
    if cell.dx_dc is not None:
        out["lic_ub"] = lic_ub_scores(cell)
    return out
