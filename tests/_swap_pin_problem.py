"""A fixed small swap problem whose scores are pinned in tests/method/test_swap_pinned.py (so that any change of the
swap reading's numbers shows)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from faux_checks.method.auxiliary import AuxiliaryModel, AuxNet
from faux_checks.method.counterfactual import SwapSettings
from faux_checks.method.faux import FAuxTester
from faux_checks.method.output import TargetOutput

D = 7
N = 300


def _problem(case: str):
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    X = rng.normal(size=(N, D)).astype(np.float32)
    z = X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=N)
    kind = {"binary": "binary", "three": "multiclass", "continuous": "continuous"}.get(case.split("-")[0], "binary")
    if kind == "binary":
        c = (z > 0).astype(np.int64)
        m = 1
    elif kind == "multiclass":
        c = np.digitize(z, np.quantile(z, [1 / 3, 2 / 3])).astype(np.int64)
        m = 3
    else:
        c = z.astype(np.float64)
        m = 1
    protected = case.endswith("-direct")
    d_aux = D - 1 if protected else D
    target = nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)).eval()
    net = AuxNet(d_aux, m, (16, 16), torch.zeros(d_aux), torch.ones(d_aux))
    aux = AuxiliaryModel.from_module(net, kind=kind, n_features=d_aux)
    settings = SwapSettings()
    if case.endswith("-path"):
        settings = SwapSettings(steps=2, line_search=2)
    if case.endswith("-first"):
        settings = SwapSettings(evaluation="first_order")
    kw = {}
    if protected:
        mask = np.zeros(D, dtype=bool)
        mask[-1] = True
        X[:, -1] = c.astype(np.float32)
        kw = {"protected_mask": mask, "direct_levels": np.array([[0.0], [1.0]], dtype=np.float32)}
    output = TargetOutput(form="logit", target_class=1)
    if case.endswith("-prob"):
        target = nn.Sequential(target, nn.Sigmoid()).eval()
        output = TargetOutput(form="probability", target_class=1)
    tester = FAuxTester(target, aux, variant="swap", output=output, swap=settings, chunk_size=64, **kw)
    keep = ~kw["protected_mask"] if protected else np.ones(D, dtype=bool)
    admissible = np.zeros(d_aux, dtype=bool)
    admissible[2] = True
    # no informativeness test: the untrained aux net reads nothing, and the test would hold every feature; the
    # features independent of c are held (x3..x6), x0 and x1 move
    # "-path": the auxiliary model's move (metric "between" with its guard, Newton steps, line search), pinned too
    metric = "between" if case.endswith("-path") else "matched"
    tester.fit_reference(X[:200][:, keep], c[:200], admissible=admissible, metric=metric)
    return tester, X, c


CASES = ("binary", "three", "continuous", "binary-path", "binary-first", "binary-direct", "binary-prob")


def summary(case: str) -> dict:
    """Scores and what comes with them, reduced to a few numbers (JSON-friendly)."""
    tester, X, c = _problem(case)
    r = tester.evaluate(X, c, evidence=True)
    s = np.nan_to_num(r.scores, nan=-1.0)
    return {
        "scores_head": s[:6].tolist(),
        "scores_sum": float(s.sum()),
        "scores_sq": float((s ** 2).sum()),
        "scores_max": float(s.max()),
        "undefined": int(r.undefined.sum()),
        "probability_sum": float(r.probability.sum()),
        "cf_probability_sum": float(np.nan_to_num(r.counterfactual_probability, nan=-1.0).sum()),
        "cf_target_sum": int(r.counterfactual_target.sum()),
        "direct_sum": None if r.direct is None else float(r.direct.sum()),
        "evidence_abs_sum": float(np.nansum(np.abs(r.evidence))),
    }


if __name__ == "__main__":
    import json

    print(json.dumps({case: summary(case) for case in CASES}, indent=1))
