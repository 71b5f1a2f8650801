"""Load benchmark of the gate flow: N registered versions gated in one Prefect flow run.

Registers ``--versions`` tiny TorchScript models (``Linear(5, 1)``; every third one leans on a
proxy of the protected attribute and fails) in a fresh embedded sqlite MLflow registry, then runs
the ``fairness-gate`` flow once on ``--rows`` audit rows, exactly as ``faux-checks gate`` does
(Prefect's ephemeral API, started by the first flow call). Prints wall times, per-version stage
times (median / max), and peak RSS, and checks that every version got a recorded decision.

    python benchmarks/bench_load.py                      # 20 versions, 500 rows
    python benchmarks/bench_load.py --versions 50 --rows 2000 --json out.json

Peak RSS is ``resource.getrusage``: this process (the flow, its tasks, GX, torch, MLflow) and,
separately, its largest waited-for child (Prefect's temporary API server). Torch runs on
``--threads`` intra-op threads (default 1, as the test suite).

Memory over versions: the current RSS
(``psutil``) is read after every version's gate, and the least-squares slope over versions 2..N (the
first version pays the one-off imports and caches) is the last line printed, ``rss_slope_mb_per_version=``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _mib(kib: int) -> float:
    return kib / 1024.0  # ru_maxrss is in KiB on Linux


def _slope(ys: list[float]) -> float | None:
    """Least-squares slope of ``ys`` against 0..n-1 (MiB per version); None under 2 points."""
    if len(ys) < 2:
        return None
    n = len(ys)
    mean_x, mean_y = (n - 1) / 2, sum(ys) / n
    num = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(ys))
    return round(num / sum((i - mean_x) ** 2 for i in range(n)), 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", type=int, default=20)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=30, help="aux model epochs (policy [aux] epochs)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workdir", help="new folder for the registry, data and reports (default: a temp dir)")
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args(argv)

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="faux-bench-load-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("FAUX_CHECKS_HOME", str(workdir / "home"))
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    from faux_checks.settings import configure_environment

    configure_environment()
    import numpy as np
    import pandas as pd
    import torch

    torch.set_num_threads(args.threads)
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    rng = np.random.default_rng(0)
    sex = rng.choice(["F", "M"], args.rows)
    z = rng.normal(size=(args.rows, 4))
    data = pd.DataFrame(z, columns=["f0", "f1", "f2", "f3"])
    data["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=args.rows)
    data["sex"], data["y"] = sex, (z[:, 0] > 0).astype(int)
    data.to_csv(workdir / "audit.csv", index=False)
    (workdir / "policy.toml").write_text(
        'protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n'
        f"[aux]\nepochs = {args.epochs}\n")

    t0 = time.perf_counter()
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    registry = Registry(uri)
    name = "bench-load"
    versions, expected = [], {}
    for i in range(args.versions):
        lin = torch.nn.Linear(5, 1)
        unfair = i % 3 == 1
        with torch.no_grad():
            lin.weight[:] = torch.tensor([[1.0, 0.3 + 0.01 * i, 0.0, 0.0, 2.0 if unfair else 0.0]])
            lin.bias.zero_()
        path = save_torchscript(lin, workdir / f"model-{i}.pt")
        v = registry.register_version(name, path)
        versions.append(v)
        expected[v] = "failed" if unfair else "passed"
    t_register = time.perf_counter() - t0

    import psutil

    import faux_checks_flows.gate_per_version as gate_module
    from faux_checks_flows.gate import gate

    rss_after: list[float] = []
    one_version = gate_module.gate_version

    def measured(*a, **kw):
        try:
            return one_version(*a, **kw)
        finally:
            rss_after.append(psutil.Process().memory_info().rss / 2**20)

    gate_module.gate_version = measured   # looked up by name in gate_version_leased at each call
    t1 = time.perf_counter()
    state = gate(model_name=name, data_path=str(workdir / "audit.csv"), policy_path=str(workdir / "policy.toml"),
                 tracking_uri=uri, report_root=str(workdir / "reports"), return_state=True)
    t_flow = time.perf_counter() - t1
    outcomes = getattr(state.data, "result", state.data)
    history = {r["version"]: r.get("fairness_gate") for r in registry.history(name)}
    recorded = sum(history.get(v) in ("passed", "failed", "undecided") for v in versions)
    correct = sum(history.get(v) == expected[v] for v in versions)
    stages: dict[str, list[float]] = {}
    for o in outcomes if isinstance(outcomes, list) else []:
        for k, sec in (o.get("timings") or {}).items():
            stages.setdefault(k, []).append(sec)
    self_rss = _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    child_rss = _mib(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    result = {
        "versions": args.versions, "rows": args.rows, "threads": args.threads, "aux_epochs": args.epochs,
        "register_s": round(t_register, 2), "flow_wall_s": round(t_flow, 2),
        "per_version_s": round(t_flow / max(args.versions, 1), 3),
        "stages_median_s": {k: round(statistics.median(v), 3) for k, v in stages.items()},
        "stages_max_s": {k: round(max(v), 3) for k, v in stages.items()},
        "stages_total_s": round(sum(sum(v) for v in stages.values()), 2),  # the rest of flow_wall_s: Prefect
        # (ephemeral API start on the first call, task/flow bookkeeping, artifacts)
        "decisions_recorded": recorded, "decisions_as_expected": correct, "flow_state": str(state.type.value),
        "peak_rss_mib": round(self_rss, 1), "peak_rss_largest_child_mib": round(child_rss, 1),
        "alias": registry.alias_version(name, "deployable"), "workdir": str(workdir),
    }
    result["rss_after_version_mib"] = [round(x, 1) for x in rss_after]
    result["rss_slope_mib_per_version"] = _slope(rss_after[1:])
    print(json.dumps(result, indent=2))
    print(f"flow_wall_s={result['flow_wall_s']} per_version_s={result['per_version_s']} "
          f"peak_rss_mib={result['peak_rss_mib']} recorded={recorded}/{args.versions}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(f"rss_slope_mb_per_version={result['rss_slope_mib_per_version']}")
    return 0 if recorded == args.versions and correct == args.versions else 1


if __name__ == "__main__":
    sys.exit(main())
