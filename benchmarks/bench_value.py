"""Value targets: a credit limit in EUR gated with δ in EUR, against its known per-person counterfactual change.

Data: :func:`faux_checks.groundtruth.value.make_value_data` (n bundled Adult rows, binary c and four proxies
injected, limit = f(x) − β·c·g(x) EUR). Targets: the exact closed-form limit (a forward-only target on the encoded
matrix) and a HistGradientBoostingRegressor fitted to the limits (read through ``predict``, no sigmoid). Ground
truth: the exact target moves by β·g(x) when only c changes; the fitted one is queried on the counterfactual rows
(proxies regenerated with the same noise). Policy: the shipped default with ``target_output = "value"``,
``[faux] delta = 500``, ``unit = "EUR"``, no label.

    python benchmarks/bench_value.py [--n 3000] [--betas 0 0.5] [--seeds 0 1 2] [--targets exact hgb]
                                     [--cutoff 8000 --delta 5000]

Prints one line per cell: target, β, seed, true share, flagged fraction (interval), aux quality, decision, wall time.
With ``--cutoff T`` the policy also sets ``[faux] cutoff = T``, ``cutoff_side = "above"`` (a limit of T EUR or more
is favourable) and the line adds the true share that crosses T EUR if only c changed
(:meth:`~faux_checks.groundtruth.value.ValueData.true_crossing`; the fitted target's on its counterfactual rows), the
share read (``check.outcome.cutoff``) with its interval, and the status of rule ``cutoff_crossing``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def value_policy(seed: int, delta: float = 500.0, unit: str = "EUR", cutoff: float | None = None, **decision):
    """The shipped default policy for protected column ``c`` with δ in ``unit`` (a value target), no label; with
    ``cutoff``, the cut-off reading with the favourable side above it."""
    from faux_checks import Policy, load_policy

    base = load_policy(protected="c", seed=seed).model_dump()
    side = None if cutoff is None else "above"
    return Policy.model_validate({**base, "label": None, "target_output": "value",
                                  "faux": {**base["faux"], "delta": delta, "unit": unit, "cutoff": cutoff,
                                           "cutoff_side": side},
                                  "decision": {**base["decision"], **decision}})


def crossing_truth(data, target, spec, cutoff: float) -> float:
    """The true share whose output crosses ``cutoff`` EUR if only c changed: exact for the closed-form limit, the
    fitted target queried on the counterfactual rows otherwise."""
    from faux_checks import ForwardOnlyTarget
    from faux_checks.groundtruth.value import value_crossing_truth

    if isinstance(target, ForwardOnlyTarget):
        return data.true_crossing_share(cutoff)
    return float(np.mean(value_crossing_truth(lambda f: target.predict(spec.encode(f)), data, cutoff)))


def crossing_text(res, truth: float) -> str:
    """`` crossing truth=… read=… [lower, upper] covers|misses rule=…`` from a check with a cut-off reading."""
    reading = res.outcome["cutoff"]
    iv = reading["interval"]
    rule = next(r["status"] for r in res.rules if r["rule"] == "cutoff_crossing")
    inside = iv["lower"] <= truth <= iv["upper"]
    return (f" crossing truth={truth:.2%} read={iv['fraction']:.2%} [{iv['lower']:.2%}, {iv['upper']:.2%}] "
            f"{'covers' if inside else 'misses'} rule={rule}")


def value_target(data, kind: str, seed: int, delta: float = 500.0):
    """(target, feature spec, true share at ``delta`` EUR) for ``kind`` "exact" or "hgb"."""
    from faux_checks import FeatureSpec, ForwardOnlyTarget
    from faux_checks.groundtruth.value import VALUE_COLUMNS, exact_limit_target, value_fairness_scores

    frame = data.frame()
    spec = FeatureSpec.fit(frame, columns=[*VALUE_COLUMNS, "proxy_linear", "proxy_nonlinear", "proxy_category",
                                           "proxy_legit", "c"])
    if kind == "exact":
        return (ForwardOnlyTarget(exact_limit_target(data, spec), access="forward (exact limit)", output_form="value"),
                spec, data.true_share(delta))
    from sklearn.ensemble import HistGradientBoostingRegressor

    model = HistGradientBoostingRegressor(max_iter=300, random_state=seed).fit(spec.encode(frame), data.limit())
    truth = float(np.mean(value_fairness_scores(lambda f: model.predict(spec.encode(f)), data) > delta))
    return model, spec, truth


def main() -> None:
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.groundtruth.value import make_value_data
    from faux_checks.inputs.datasets import load_adult

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--betas", type=float, nargs="+", default=[0.0, 0.5])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--targets", nargs="+", default=["exact", "hgb"])
    ap.add_argument("--delta", type=float, default=500.0, help="δ in EUR")
    ap.add_argument("--cutoff", type=float, default=None, help="a cut-off in EUR (favourable side: above)")
    args = ap.parse_args()
    adult = load_adult()
    for kind in args.targets:
        for beta in args.betas:
            for seed in args.seeds:
                data = make_value_data(adult, n=args.n, beta=beta, seed=seed)
                target, spec, truth = value_target(data, kind, seed, args.delta)
                t0 = time.perf_counter()
                policy = value_policy(seed, delta=args.delta, cutoff=args.cutoff)
                res = check_one_attribute(target, data.frame(), policy=policy, feature_spec=spec)
                wall = time.perf_counter() - t0
                iv = res.interval
                inside = iv.lower <= truth <= iv.upper
                crossing = "" if args.cutoff is None else crossing_text(res, crossing_truth(data, target, spec,
                                                                                              args.cutoff))
                print(f"{kind:5s} beta={beta:<4g} seed={seed} truth={truth:.2%} flagged={res.flagged_fraction:.2%} "
                      f"[{iv.lower:.2%}, {iv.upper:.2%}] {'covers' if inside else 'misses'}{crossing} "
                      f"aux={res.aux_quality:.3f} {res.decision} {wall:.0f}s", flush=True)


if __name__ == "__main__":
    main()
