"""Benchmark: one drift audit of a 100,000-row current batch against the 48,842-row UCI Adult reference.

Setup (not timed): UCI Adult from the package (``faux_checks.inputs.datasets.load_adult``, all 48,842 rows;
UCI's ``?`` kept as its own category), a FeatureSpec over ``ADULT_FEATURES``, a 2x64 MLP income
classifier trained for a few epochs, a tmp sqlite registry holding it as a version that passed the
gate on the reference (tags written directly, with ``fairness_data_path``), and a current batch of
100,000 rows resampled from Adult with perturbations (``--shift``).

Timed: the ``fairness-audit`` Prefect flow end to end (ephemeral API; its start is timed apart), with
the library's own step timings (column drift: Evidently import, run, HTML; fairness drift: the fAux
check on each batch; classification quality) and the flow's tasks (find the version, download,
read both CSVs, audit, write the report, MLflow run + tags).

Run from a checkout::

    python benchmarks/bench_audit.py                      # default: --shift features, 2 torch threads
    python benchmarks/bench_audit.py --shift protected    # the protected attribute drifts as well
    python benchmarks/bench_audit.py --json out.json

Goal: the audit flow ≤ 90 s wall on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _adult():
    from faux_checks.inputs.datasets import load_adult

    df = load_adult(drop_missing=False).drop(columns="split")
    for col in ("workclass", "occupation", "native-country"):
        df[col] = df[col].fillna("?")  # UCI's own missing marker, kept as a category
    return df


def _current(reference, n: int, shift: str, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    cur = reference.sample(n, replace=True, random_state=seed).reset_index(drop=True)
    cur["age"] = (cur["age"] + rng.normal(0, 2, n)).round().clip(17, 90).astype("int64")
    cur["hours-per-week"] = (cur["hours-per-week"] * rng.normal(1.0, 0.05, n)).round().clip(1, 99).astype("int64")
    if shift in ("features", "protected"):
        cur["age"] = (cur["age"] + 6).clip(17, 90)  # an older population
        cur["capital-gain"] = np.where(rng.random(n) < 0.05, cur["capital-gain"] + 5000, cur["capital-gain"])
    if shift == "protected":
        women = cur["sex"] == "Female"
        flip = rng.random(n) < 0.4
        cur.loc[women & flip, "sex"] = "Male"
    return cur


def _train(X, y, epochs: int, seed: int):
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(seed)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y, dtype=torch.float32)
    for _ in range(epochs):
        perm = torch.randperm(len(Xt), generator=gen)
        for s in range(0, len(Xt), 1024):
            idx = perm[s:s + 1024]
            opt.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(model(Xt[idx])[:, 0], yt[idx]).backward()
            opt.step()
    return model.eval()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000, help="current batch rows")
    p.add_argument("--shift", choices=["none", "features", "protected"], default="features")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--epochs", type=int, default=3, help="target model training epochs (setup)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the timings here")
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    os.environ.setdefault("FAUX_CHECKS_HOME", str(work / "home"))
    os.environ.setdefault("PREFECT_HOME", str(work / "prefect"))
    from faux_checks.settings import configure_environment

    configure_environment()
    import torch

    torch.set_num_threads(args.threads)
    from faux_checks.inputs.datasets import ADULT_FEATURES
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks.inputs.tabular import FeatureSpec

    t0 = time.perf_counter()
    reference = _adult()
    current = _current(reference, args.rows, args.shift, args.seed + 1)
    ref_path, cur_path = work / "reference.csv", work / "current.csv"
    reference.to_csv(ref_path, index=False)
    current.to_csv(cur_path, index=False)
    spec = FeatureSpec.fit(reference, ADULT_FEATURES, min_frequency=50, name="adult-bench")
    model = _train(spec.encode(reference), reference["income"].to_numpy(), args.epochs, args.seed)
    save_torchscript(model, work / "model.pt")
    spec.save(work / "spec.json")
    policy = work / "policy.toml"
    policy.write_text('protected = "sex"\nlabel = "income"\ntarget_output = "logit"\nmin_aux_quality = 0.7\n'
                      '[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.05\n')
    uri = f"sqlite:///{work}/mlflow.db"
    registry = Registry(uri)
    version = registry.register_version("adult-bench", work / "model.pt", work / "spec.json")
    registry.record_decision("adult-bench", version, decision="passed", flagged_fraction=None, delta=0.05,
                             aux_quality=None, report_uri="", run_id="", extra={"fairness_data_path": str(ref_path)})
    registry.promote("adult-bench", version)
    setup_s = time.perf_counter() - t0
    print(f"setup {setup_s:.1f} s: reference {len(reference):,} rows, current {len(current):,} rows "
          f"(shift: {args.shift}), {spec.n_features} encoded features", flush=True)

    from prefect.testing.utilities import prefect_test_harness

    t0 = time.perf_counter()
    with prefect_test_harness(server_startup_timeout=120):
        api_s = time.perf_counter() - t0
        from faux_checks_flows.audit import audit

        cpu0, t0 = time.process_time(), time.perf_counter()
        state = audit(model_name="adult-bench", data_path=str(cur_path), policy_path=str(policy), tracking_uri=uri,
                      report_root=str(work / "reports"), return_state=True)
        flow_s, flow_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        summary = state.result(raise_on_failure=False)
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

            tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id])))
    task_s = {}
    for tr in tasks:
        name = tr.name.rsplit("-", 1)[0]
        task_s[name] = task_s.get(name, 0.0) + (tr.total_run_time.total_seconds() if tr.total_run_time else 0.0)
    report = json.loads((Path(summary["report_dir"]) / "report.json").read_text())
    steps = report["audit"]["timings"]
    out = {
        "rows_reference": len(reference), "rows_current": len(current), "shift": args.shift,
        "threads": args.threads, "cpu_count": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
        "setup_s": setup_s, "prefect_api_start_s": api_s, "audit_flow_wall_s": flow_s, "audit_flow_cpu_s": flow_cpu,
        "flow_tasks_s": task_s, "audit_steps_s": steps, "decision": summary["decision"], "rule": report["rule"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "evidence_mb": {p.name: p.stat().st_size / 1e6 for p in Path(summary["report_dir"]).iterdir()},
    }
    print(f"\nPrefect ephemeral API start: {api_s:.1f} s (once per process, not part of the audit)")
    print(f"audit flow: {flow_s:.1f} s wall, {flow_cpu:.1f} s CPU in this process; decision {out['decision']}: "
          f"{out['rule'][:120]}")
    print("flow tasks (s):", ", ".join(f"{k} {v:.1f}" for k, v in sorted(task_s.items(), key=lambda kv: -kv[1])))
    print("audit steps (s):")
    for k, v in steps.items():
        print(f"  {k:<40} {v:6.1f}")
    print(f"peak RSS {out['peak_rss_mb']:.0f} MB; load average {out['load_avg_1m']:.1f} on {os.cpu_count()} CPUs")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    print(f"audit_flow_wall_s={flow_s:.1f} goal<=90 {'OK' if flow_s <= 90 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
