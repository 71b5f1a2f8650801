"""Sharded fAux scoring of a large Parquet file on Dask through Prefect: memory, scaling, time to first score.

Generates n individuals x d numeric features (float32, standard normal) plus a binary
protected column ``group`` into a temporary Parquet file in row groups, then scores it with
``faux_checks_flows.score_large.run_score_sharded`` (Prefect flow, ``DaskTaskRunner`` on a local
``distributed.LocalCluster``, ``threads_per_worker=1``) once per worker count, each run in its own
process, and deletes the file at the end.

    python benchmarks/bench_scale.py --n 1000000            # quick look (~400 MB file)
    python benchmarks/bench_scale.py                         # n = 10,000,000, d = 100: a 4 GB file
    python benchmarks/bench_scale.py --workers 0,1,2 --json out.json   # 0 = score_stream in one process

What is measured, per run (``--workers`` list, default 1,2):

- **peak RSS per process**: every process of the run's tree (driver = the flow's process, the
  Prefect temporary server, Dask nanny and worker processes) is sampled every 0.2 s with psutil;
  worker processes also report their own ``ru_maxrss`` at the end of each shard task, the driver
  its own at the end. The table shows the larger of the two. Goal: < 2 GiB per process.
- **throughput**: rows / wall seconds of the score pass (all shards submitted to the last shard
  done), and rows / end-to-end seconds of the flow body (sample pass + aux + score + merge);
  the ratio 2 workers / 1 worker of the score pass is the scaling (goal >= 1.7x on 2 cores).
  Workers' CPU seconds are recorded too (rows per worker CPU-second is steady under other load).
- **time to first score**: seconds from launching the run's process (imports, Prefect server and
  Dask cluster start included) and from the start of the flow body, to the first chunk's scores
  written by any worker.
- **exactness**: the score files of all runs are compared row group by row group (must be identical).
- **control**: ``FAuxTester`` on an in-memory X in one plain process, then in two at once (no
  Prefect, no Dask), before and after the runs: on a machine shared with other jobs this is the
  2-vs-1 ratio the machine itself allows at that moment, the ceiling for the Dask ratio.

Models: random-init target ``Linear(d,64)-ReLU-Linear(64,64)-ReLU-Linear(64,1)`` read as a logit,
and a random ``AuxNet`` (hidden 64, 64) given as the auxiliary model (TorchScript), so no training
(``--train-aux`` trains one on the sample instead). Policy: binary protected ``group``, δ = 0.05,
``min_aux_quality = 0`` (random models: the decision is not the point), the default aux sample of
200,000 rows (used for the given aux model's quality), ``chunk_rows`` 16,384 (the ``[scale]`` default).

The 32-worker projection is the measured per-worker score rate x 32 (linear; it assumes the
storage delivers 32 x rate x d x 4 bytes/s and ignores scheduler overhead), and the same scaled
by the measured 1->2 worker efficiency.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL_RSS_MB = 2048
GOAL_RATIO = 1.7


# ---------------------------------------------------------------------------- data and models
def generate(path: Path, n: int, d: int, row_group_rows: int, seed: int = 0) -> float:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    names = [f"f{j:03d}" for j in range(d)]
    schema = pa.schema([*(pa.field(c, pa.float32()) for c in names), pa.field("group", pa.int8())])
    with pq.ParquetWriter(str(path), schema) as writer:
        for start in range(0, n, row_group_rows):
            m = min(row_group_rows, n - start)
            X = rng.standard_normal((m, d), dtype=np.float32)
            group = (rng.random(m) < 0.5).astype(np.int8)
            cols = [pa.array(X[:, j]) for j in range(d)] + [pa.array(group)]
            writer.write_table(pa.Table.from_arrays(cols, schema=schema), row_group_size=m)
    return time.perf_counter() - t0


def save_models(folder: Path, d: int) -> tuple[Path, Path]:
    import torch

    from faux_checks.method.auxiliary import AuxNet

    torch.manual_seed(0)
    target = torch.nn.Sequential(torch.nn.Linear(d, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                 torch.nn.Linear(64, 1)).eval()
    aux = AuxNet(d, 1, (64, 64), torch.zeros(d), torch.ones(d)).eval()
    tp, ap = folder / "target.pt", folder / "aux.pt"
    torch.jit.save(torch.jit.script(target), str(tp))
    torch.jit.save(torch.jit.script(aux), str(ap))
    return tp, ap


def policy_dict(args) -> dict:
    return {"name": "bench-scale", "protected": "group", "target_output": "logit", "min_aux_quality": 0.0,
            "faux": {"delta": 0.05, "max_flagged_fraction": 0.05, "max_undefined_fraction": 0.01},
            "aux": {"epochs": args.aux_epochs, "max_train_rows": args.max_train_rows},
            "scale": {"chunk_rows": args.chunk_rows, "threads_per_worker": 1}}


# ---------------------------------------------------------------------------- one run (child process)
def run_child(args) -> None:
    import resource

    from faux_checks.settings import configure_environment

    configure_environment()
    from faux_checks.gate.policy import Policy

    policy = Policy.model_validate(policy_dict(args))
    aux = None if args.train_aux else args.aux
    t0 = time.time()
    if args.run_workers == 0:
        import torch

        from faux_checks.inputs.models import load_model
        from faux_checks.gate.stream.run import score_stream

        torch.set_num_threads(1)
        summary = score_stream(load_model(args.model), args.data, policy=policy, out_path=args.out,
                               aux_model=load_model(aux) if aux else None).sections[0].summary
        workers_rss = {}
    else:
        from faux_checks_flows.score_large import run_score_sharded

        summary = run_score_sharded(args.model, args.data, args.out, policy=policy, aux_model_path=aux,
                                    workers=args.run_workers).sections[0].summary
        workers_rss = summary.provenance.get("worker_peak_rss_mb", {})
    t1 = time.time()
    res = {"workers": args.run_workers, "n": summary.n_rows, "decision": summary.decision,
           "flagged_fraction": summary.flagged_fraction, "timings": summary.timings,
           "first_score_at": summary.provenance.get("first_score_at"), "child_start": t0, "child_end": t1,
           "driver_ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "worker_ru_maxrss_mb": {str(k): v for k, v in workers_rss.items()},
           "shards": summary.provenance.get("shards"), "notes": summary.notes}
    print("RESULT " + json.dumps(res, default=float), flush=True)


def run_control_child(args) -> None:
    """FAuxTester on an in-memory X in chunks, 1 torch thread: the machine's own per-process rate."""
    import numpy as np
    import torch

    from faux_checks import AuxiliaryModel, FAuxTester, TargetOutput
    from faux_checks.inputs.models import load_model

    torch.set_num_threads(1)
    aux = AuxiliaryModel.from_module(load_model(args.aux), kind="binary", n_features=args.d, groups=("0", "1"))
    tester = FAuxTester(load_model(args.model), aux, output=TargetOutput("logit"), chunk_size=args.chunk_rows)
    X = np.random.default_rng(1).standard_normal((args.control_rows, args.d), dtype=np.float32)
    tester.evaluate(X[: args.chunk_rows], evidence=False)  # warm-up (TorchScript profiling runs)
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, len(X), args.chunk_rows):
        tester.evaluate(X[start : start + args.chunk_rows], evidence=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print("RESULT " + json.dumps({"rows_per_s": len(X) / wall, "rows_per_cpu_s": len(X) / cpu}), flush=True)


def control(args, paths: dict) -> dict:
    """Rows/s of one plain process, then of two at once (no Prefect, no Dask): the machine's 2-core ceiling."""
    cmd = [sys.executable, os.path.abspath(__file__), "--control-child", "--model", str(paths["model"]), "--aux",
           str(paths["aux"]), "--d", str(args.d), "--chunk-rows", str(args.chunk_rows),
           "--control-rows", str(args.control_rows)]

    def run(k: int) -> list[dict]:
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(k)]
        outs = [p.communicate()[0] for p in procs]
        return [json.loads(next(x for x in o.splitlines() if x.startswith("RESULT "))[7:]) for o in outs]

    one = run(1)
    two = run(2)
    res = {"one": one[0]["rows_per_s"], "two": sum(r["rows_per_s"] for r in two),
           "cpu_one": one[0]["rows_per_cpu_s"], "cpu_two": [r["rows_per_cpu_s"] for r in two],
           "load": os.getloadavg()[0]}
    res["ratio"] = res["two"] / res["one"]
    print(f"  [control: 1 process {res['one']:,.0f} rows/s, 2 processes {res['two']:,.0f} rows/s = {res['ratio']:.2f}x]",
          file=sys.stderr, flush=True)
    return res


# ---------------------------------------------------------------------------- driver (parent)
class TreeMonitor(threading.Thread):
    """Samples RSS and CPU times of a process and all its descendants every ``interval`` seconds."""

    def __init__(self, pid: int, interval: float = 0.2):
        super().__init__(daemon=True)
        import psutil

        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak: dict[int, float] = {}
        self.cpu: dict[int, float] = {}
        self.role: dict[int, str] = {}
        self.stop_flag = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.stop_flag.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for p in procs:
                try:
                    rss = p.memory_info().rss / 2**20
                    t = p.cpu_times()
                    self.peak[p.pid] = max(self.peak.get(p.pid, 0.0), rss)
                    self.cpu[p.pid] = t.user + t.system
                    if self.role.get(p.pid, "other") == "other":  # a just-spawned process has no cmdline yet
                        self.role[p.pid] = classify(p, self.root.pid)
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
            time.sleep(self.interval)


def classify(p, root_pid: int) -> str:
    if p.pid == root_pid:
        return "driver"
    cmd = " ".join(p.cmdline())
    if "uvicorn" in cmd or "prefect.server" in cmd:
        return "prefect server"
    if "multiprocessing" in cmd and "resource_tracker" in cmd:
        return "mp resource tracker"
    if "spawn_main" in cmd or "forkserver" in cmd or "multiprocessing" in cmd:
        return "dask worker"
    return "other"


def run_config(workers: int, args, paths: dict) -> dict:
    out = paths["dir"] / f"scores-w{workers}.parquet"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--run-workers", str(workers), "--data",
           str(paths["data"]), "--model", str(paths["model"]), "--aux", str(paths["aux"]), "--out", str(out),
           "--chunk-rows", str(args.chunk_rows), "--max-train-rows", str(args.max_train_rows),
           "--aux-epochs", str(args.aux_epochs)]
    if args.train_aux:
        cmd.append("--train-aux")
    env = {**os.environ, "PREFECT_HOME": str(paths["dir"] / "prefect"), "DO_NOT_TRACK": "true",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING"}
    load0 = os.getloadavg()[0]
    launch = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    mon = TreeMonitor(proc.pid)
    mon.start()
    stdout, stderr = proc.communicate()
    mon.stop_flag.set()
    mon.join()
    if proc.returncode != 0:
        sys.stderr.write(stderr[-5000:])
        raise SystemExit(f"run with {workers} workers failed (exit {proc.returncode})")
    line = next(x for x in stdout.splitlines() if x.startswith("RESULT "))
    res = json.loads(line[len("RESULT "):])
    res["launch"] = launch
    res["load_before"], res["load_after"] = load0, os.getloadavg()[0]
    res["first_score_from_launch_s"] = (res["first_score_at"] - launch) if res.get("first_score_at") else None
    res["wall_s"] = res["child_end"] - launch
    by_role: dict[str, list] = {}
    for pid, peak in mon.peak.items():
        role = mon.role.get(pid, "other")
        if role == "dask worker" and str(pid) in res["worker_ru_maxrss_mb"]:
            peak = max(peak, res["worker_ru_maxrss_mb"][str(pid)])
        if role == "driver":
            peak = max(peak, res["driver_ru_maxrss_mb"])
        by_role.setdefault(role, []).append((pid, peak, mon.cpu.get(pid, 0.0)))
    res["processes"] = by_role
    score_s = res["timings"]["score"]
    res["score_rows_per_s"] = res["n"] / score_s
    flow_s = res["timings"]["total"]
    res["end_to_end_rows_per_s"] = res["n"] / flow_s
    worker_cpu = sum(c for role, rows in by_role.items() if role == "dask worker" for _, _, c in rows)
    if workers == 0:
        worker_cpu = sum(c for _, _, c in by_role.get("driver", []))
    res["worker_cpu_s"] = worker_cpu
    res["out"] = str(out)
    print(f"  [{workers} worker(s): {res['wall_s']:.1f} s, score pass {score_s:.1f} s = "
          f"{res['score_rows_per_s']:,.0f} rows/s, load {load0:.1f}->{res['load_after']:.1f}]", file=sys.stderr, flush=True)
    return res


def compare_outputs(paths: list[str]) -> str:
    import numpy as np

    if len(paths) < 2:
        return "only one run"
    import pyarrow.dataset as ds

    from faux_checks.gate.stream.output import score_files

    files = [ds.dataset([str(f) for f in score_files(p)], format="parquet") for p in paths]  # a file or a dataset folder
    rows = {f.count_rows() for f in files}
    if len(rows) != 1:
        return f"DIFFERENT row counts {rows}"
    ref = files[0]
    readers = [_rebatch(f.to_batches(columns=["row", "lic_score", "status"], batch_size=1 << 20)) for f in files]
    worst, n = 0.0, 0
    for batches in zip(*readers, strict=False):
        a = batches[0]
        for b in batches[1:]:
            if not (a.column("row").equals(b.column("row")) and a.column("status").equals(b.column("status"))):
                return "DIFFERENT rows or statuses"
            x, y = a.column("lic_score").to_numpy(), b.column("lic_score").to_numpy()
            if not np.array_equal(np.isnan(x), np.isnan(y)):
                return "DIFFERENT undefined rows"
            diff = np.abs(x - y)[~np.isnan(x)]
            worst = max(worst, float(diff.max()) if len(diff) else 0.0)
        n += len(a)
    del ref
    return "identical (bit for bit)" if worst == 0.0 else f"max |difference| {worst:.3g}"


def _rebatch(batches, size: int = 1 << 20):
    """Record batches of exactly ``size`` rows (the last shorter), whatever the files' row groups: runs compare batch by batch."""
    import pyarrow as pa

    buf, n = [], 0
    for b in batches:
        buf.append(b)
        n += len(b)
        while n >= size:
            t = pa.Table.from_batches(buf).combine_chunks()
            yield t.slice(0, size).to_batches()[0]
            rest = t.slice(size)
            buf, n = ([rest.combine_chunks().to_batches()[0]] if len(rest) else []), len(rest)
    if n:
        yield pa.Table.from_batches(buf).combine_chunks().to_batches()[0]


def serial_seconds(timings: dict) -> float:
    """Seconds of the run's critical path that more workers do not shorten: plan, the wait for the aux model, merge.

    The sample and score passes run on the workers (the extra aux seeds too); everything else runs
    in the driver, or on one worker while the first shard waits for it.
    """
    return sum(float(timings.get(k) or 0.0) for k in ("plan", "aux", "merge"))


def amdahl(r: dict, rows: int, workers: int) -> float:
    """Projected flow seconds for ``rows`` rows on ``workers`` workers from run ``r`` (Amdahl, linear per-row work).

    plan and aux are fixed (the aux sample has ``max_train_rows`` rows whatever n), merge grows with the rows, the
    sample and score passes grow with the rows and divide over the workers (perfect scaling of the measured run's
    worker-seconds: an upper bound on the speed).
    """
    t, scale = r["timings"], rows / r["n"]
    fixed = float(t.get("plan") or 0.0) + float(t.get("aux") or 0.0)
    parallel = (float(t["sample"]) + float(t["score"])) * max(1, r["workers"])
    return fixed + float(t.get("merge") or 0.0) * scale + parallel * scale / workers


def print_table(results: list[dict], args, gen_s: float, file_mb: float, same: str, ctl: dict | None) -> None:
    print(f"\nsharded fAux scoring: n={args.n:,} x d={args.d} float32 from Parquet ({file_mb:,.0f} MB, row groups of "
          f"{args.row_group_rows:,}, generated in {gen_s:.0f} s), chunk_rows={args.chunk_rows:,}, aux "
          f"{'trained' if args.train_aux else 'given (random AuxNet)'}, sample {args.max_train_rows:,} rows; "
          f"{os.cpu_count()} CPU cores; workers 0 = score_stream in one process (1 torch thread)")
    hdr = (f"{'workers':>7}{'shards':>7}{'sample s':>9}{'aux s':>7}{'score s':>9}{'merge s':>8}{'flow s':>8}"
           f"{'score rows/s':>13}{'e2e rows/s':>11}{'rows/CPU-s':>11}{'1st score':>10}{'(launch)':>9}"
           f"{'driver MB':>10}{'server MB':>10}{'max worker MB':>14}{'load':>10}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        t = r["timings"]
        procs = r["processes"]
        peak = lambda role, procs=procs: max((p for _, p, _ in procs.get(role, [])), default=0.0)  # noqa: E731
        shards = len(r["shards"]) if r.get("shards") else 1
        cpu_rate = r["n"] / r["worker_cpu_s"] if r["worker_cpu_s"] else float("nan")
        print(f"{r['workers']:>7}{shards:>7}{t['sample']:>9.1f}{t['aux']:>7.1f}{t['score']:>9.1f}{t['merge']:>8.1f}"
              f"{t['total']:>8.1f}{r['score_rows_per_s']:>13,.0f}{r['end_to_end_rows_per_s']:>11,.0f}{cpu_rate:>11,.0f}"
              f"{t['first_score']:>10.1f}{r['first_score_from_launch_s']:>9.1f}{peak('driver'):>10,.0f}"
              f"{peak('prefect server'):>10,.0f}{peak('dask worker'):>14,.0f}"
              f"{r['load_before']:>5.1f}>{r['load_after']:<4.1f}")
    print("\nserial part (plan + aux wait + merge: not shortened by more workers) and the Amdahl projection to "
          "1,000,000,000 rows (README):")
    for r in results:
        ser, total = serial_seconds(r["timings"]), float(r["timings"]["total"])
        proj = ", ".join(f"{w} workers {amdahl(r, 10**9, w) / 60:,.1f} min" for w in (2, 8, 32, 128, 1024))
        print(f"  workers={r['workers']}: serial {ser:.1f} s of {total:.1f} s = {ser / total:.1%}; 1B rows: {proj}; "
              f"limit (any number of workers) {amdahl(r, 10**9, 10**12) / 60:,.1f} min")
    print("\nscore files of all runs: " + same)
    print("peak RSS of every process (MB):")
    for r in results:
        cells = [f"{role} {pid}: {peak:,.0f}" for role, rows in r["processes"].items() for pid, peak, _ in rows]
        print(f"  workers={r['workers']}: " + "; ".join(cells))
    ok = lambda b: "PASS" if b else "FAIL"  # noqa: E731
    worst = max(p for r in results for rows in r["processes"].values() for _, p, _ in rows)
    print(f"\ngoal peak RSS per process < {GOAL_RSS_MB} MB: {worst:,.0f} MB {ok(worst < GOAL_RSS_MB)}")
    one = next((r for r in results if r["workers"] == 1), None)
    two = next((r for r in results if r["workers"] == 2), None)
    if one and two:
        ratio = two["score_rows_per_s"] / one["score_rows_per_s"]
        e2e = two["end_to_end_rows_per_s"] / one["end_to_end_rows_per_s"]
        print(f"goal 2 vs 1 worker score throughput >= {GOAL_RATIO}x: {ratio:.2f}x {ok(ratio >= GOAL_RATIO)} "
              f"(end to end {e2e:.2f}x; in rows per worker CPU-second {one['n'] / one['worker_cpu_s']:,.0f} vs "
              f"{two['n'] / two['worker_cpu_s']:,.0f})")
        per_worker = one["score_rows_per_s"]
        eff = ratio / 2
        bytes_per_row = args.d * 4
        print(f"projection, 32 workers: {32 * per_worker:,.0f} rows/s linear from {per_worker:,.0f} rows/s per worker "
              f"({32 * per_worker * bytes_per_row / 2**20:,.0f} MB/s of feature reads); "
              f"{32 * per_worker * eff:,.0f} rows/s at the measured 2-worker efficiency {eff:.0%}; "
              f"{args.n:,} rows in {args.n / (32 * per_worker * eff):,.1f} s of score pass")
    if ctl:
        print(f"control (FAuxTester on in-memory X, plain processes, no Prefect/Dask; load {ctl['load']:.1f}): "
              f"1 process {ctl['one']:,.0f} rows/s, 2 processes at once {ctl['two']:,.0f} rows/s = {ctl['ratio']:.2f}x "
              f"(rows per CPU-second {ctl['cpu_one']:,.0f} vs " + ", ".join(f"{c:,.0f}" for c in ctl["cpu_two"])
              + "): the 2-worker ratio this machine allows right now")
    for r in results:
        print(f"time to first score, {r['workers']} worker(s): {r['first_score_from_launch_s']:.1f} s from launch "
              f"({r['timings']['first_score']:.1f} s from the flow body's start)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000, help="individuals (default 10,000,000)")
    ap.add_argument("--d", type=int, default=100, help="numeric features (default 100)")
    ap.add_argument("--row-group-rows", type=int, default=131_072, help="Parquet row group size (default 131,072)")
    ap.add_argument("--chunk-rows", type=int, default=16_384, help="rows per chunk (default 16,384: [scale] default)")
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts; 0 = one process, no Dask")
    ap.add_argument("--max-train-rows", type=int, default=200_000, help="aux sample rows (default 200,000)")
    ap.add_argument("--train-aux", action="store_true", help="train the aux model on the sample (default: given)")
    ap.add_argument("--aux-epochs", type=int, default=5, help="epochs when --train-aux (default 5)")
    ap.add_argument("--tmp", default=None, help="folder for the data file (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--data-file", default=None,
                    help="score this Parquet file (written by an earlier run's generate(), same --n/--d) instead of generating one")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    ap.add_argument("--control-rows", type=int, default=1_048_576,
                    help="rows of the plain-process control before and after the runs (0: skip; default 1,048,576)")
    # child-process arguments
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--control-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-workers", type=int, help=argparse.SUPPRESS)
    for name in ("--data", "--model", "--aux", "--out"):
        ap.add_argument(name, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_child(args)
        return
    if args.control_child:
        run_control_child(args)
        return

    folder = Path(tempfile.mkdtemp(prefix="faux-bench-scale-", dir=args.tmp))
    need = args.n * (args.d * 4 + 1) * 1.05 + 3 * args.n * 30
    free = shutil.disk_usage(folder).free
    print(f"disk: {free / 2**30:,.1f} GiB free in {folder}; need ~{need / 2**30:,.1f} GiB", file=sys.stderr)
    if free < 1.5 * need:
        shutil.rmtree(folder, ignore_errors=True)
        raise SystemExit(f"not enough disk space in {folder}: {free / 2**30:.1f} GiB free, ~{need / 2**30:.1f} GiB needed")
    try:
        if args.data_file:       # a file generate() wrote before, with the same --n, --d, --row-group-rows
            data, gen_s = Path(args.data_file), 0.0
        else:
            data = folder / "data.parquet"
            print(f"generating {args.n:,} x {args.d} into {data} ...", file=sys.stderr, flush=True)
            gen_s = generate(data, args.n, args.d, args.row_group_rows)
        file_mb = data.stat().st_size / 2**20
        model, aux = save_models(folder, args.d)
        paths = {"dir": folder, "data": data, "model": model, "aux": aux}
        ctl = control(args, paths) if args.control_rows else None
        results = [run_config(int(w), args, paths) for w in args.workers.split(",") if w.strip()]
        ctl_after = control(args, paths) if args.control_rows else None
        if ctl and ctl_after:  # load changes during the runs: report the mean of before and after
            ctl = {"one": (ctl["one"] + ctl_after["one"]) / 2, "two": (ctl["two"] + ctl_after["two"]) / 2,
                   "cpu_one": (ctl["cpu_one"] + ctl_after["cpu_one"]) / 2, "cpu_two": ctl["cpu_two"] + ctl_after["cpu_two"],
                   "load": (ctl["load"] + ctl_after["load"]) / 2, "before": ctl, "after": ctl_after}
            ctl["ratio"] = ctl["two"] / ctl["one"]
        same = compare_outputs([r["out"] for r in results])
        print_table(results, args, gen_s, file_mb, same, ctl)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"results": results, "args": vars(args), "identical": same, "generate_s": gen_s,
                           "file_mb": file_mb, "control": ctl}, fh, indent=2, default=str)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
            print(f"removed {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
