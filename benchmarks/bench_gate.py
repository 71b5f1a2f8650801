"""Wall time of the fairness gate per model version on all of UCI Adult, and where it goes.

What runs (one process, CPU only):

1. Set-up (not counted per version): every piece of state in a fresh temporary folder
   (``FAUX_CHECKS_HOME``, ``MLFLOW_TRACKING_URI`` = sqlite file there, ``PREFECT_HOME``), telemetry
   off, the imports timed one by one. UCI Adult, all 48,842 individuals
   (``load_adult(drop_missing=False)``); the FeatureSpec refuses NaN, so in a copy the missing
   categorical values (workclass, occupation, native-country) become the explicit level ``"?"``.
   A FeatureSpec is fitted on that copy's training rows (UCI adult.data) over ``ADULT_FEATURES``
   with ``min_frequency=50``, as :func:`faux_checks_app.demo.build_demo_versions` does, and two target
   models are trained with :func:`faux_checks_app.demo.train_target` (20 epochs, seed 0): v1 on the
   recorded labels, v2 on labels with the demo's historical bias (rate 0.75); neither takes sex
   as an input. The audit file is the whole filled copy (48,842 rows, CSV). Both versions are
   registered in the MLflow registry (the first MLflow use of the process: database creation).
2. The gate: one call of the Prefect flow ``faux_checks_flows.gate.gate`` with the shipped default policy,
   which finds the 2 new versions and gates them one after the other in one flow run (the first
   flow call of the process starts Prefect's ephemeral API server).
3. Direct runs (``--skip-direct`` skips them), per version, outside Prefect: ``check_one_attribute`` on the
   same DataFrame, then ``validate_frame`` on it (model cache cleared). GX overhead is
   defined as ``validate_frame - check_one_attribute``.

Timing. Library and adapter functions are wrapped (in this process only; no library code is
changed) with a timer that records each call's wall time, this process's CPU time (all threads)
and the timed calls it was nested in: the Prefect task bodies (``task.fn``), ``gate_version``,
``check_one_attribute``, ``prepare_audit``, ``AuxiliaryModel.fit``, ``FAuxTester.evaluate``, the baselines
inside ``check_one_attribute`` (``run_baselines``), the Great Expectations baseline metrics
(``audit_inputs``, ``FTATester.score``, ``_group_metric``), ``CheckResult.to_dict``,
``gx.get_context``, model loading, the report writer and the report helpers the flow body calls,
every public ``Registry`` method, the Prefect artifacts and the ephemeral server's start. A
wrapped name that this checkout lacks is listed as "not timed". The split of one version's time
(``gate_version``) is then:

- load: the ``fetch_version`` task body (mark running + registry download with its sha256
  check) + the flow's ``model_sha256`` + the model load inside the GX metric;
- prepare / aux fit / scoring / baselines / check other: ``check_one_attribute``'s parts
  (``prepare_audit``, ``AuxiliaryModel.fit``, ``FAuxTester.evaluate``, ``run_baselines``, rest);
- GX overhead: the ``validate`` task body minus ``check_one_attribute`` minus the model load;
- recording: the ``record`` task body (report files + MLflow run + version tags), ``promote``
  (alias) for a passed version, and the report helpers the flow body calls outside any task;
- Prefect: the rest, i.e. ``gate_version`` minus the task bodies and that flow-body library work.

Flow-level work shared by the versions (finding new versions, reading the audit CSV, flow-run
bookkeeping, the ephemeral server start) is shown on its own row; ``per_version_s`` is the flow's
wall time divided by the number of versions, so it carries its share. Overhead = GX overhead +
Prefect overhead (flow wall time minus the task bodies and the flow-body library work) + time in
MLflow (outermost ``Registry`` calls). The same split is printed in CPU seconds, with the
Prefect server subprocess's CPU time on its own row: on a shared machine other processes stretch
wall times (the 2-thread aux fit most: torch's threads wait for each other), and the CPU table is
the steadier one. After the flow, the server is stopped and started once more on the database
the first start created (what a later process with a kept ``PREFECT_HOME`` pays).

The last line printed is ``per_version_s=<x> overhead_share=<y>`` (wall time; the share is of the
flow's wall time, one-time server start included).

``--cli`` measures instead what a user waits for: one ``faux-checks gate`` command on one Adult
version, as a subprocess in a fresh registry and Prefect home (interpreter start, imports, the temporary Prefect
server, the flow, teardown), against the flow's own wall time (the body of ``faux_checks_flows.gate.gate``, timed by a wrapper
the subprocess installs, so that a checkout without the flow's timing log line is measured the same way); then a
re-gate of the same version (``--version 1 --force``, a second process on the same registry: the aux model an
earlier gate recorded is reused there). ``--compare-with CHECKOUT`` (a ``git archive`` of another commit) runs the
same commands with that checkout, interleaved, for a before/after in one run. Last line:
``cli_wall_s=<x> flow_s=<y> ratio=<x/y>`` (this checkout's first gate; goal ratio <= 1.5).

Run: ``python benchmarks/bench_gate.py`` (2-4 minutes on 2 cores; Prefect's and MLflow's log lines
go to stderr). ``--threads N`` sets ``torch.set_num_threads`` (default: torch's own, as the gate
runs); ``--skip-direct``; ``--json PATH`` writes every number; ``--keep DIR`` keeps the state.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

MODEL_NAME = "adult-income"
GOAL_PER_VERSION_S = 60.0
GOAL_OVERHEAD_SHARE = 0.25
TASKS = ("find_new_versions", "fetch_version", "load_audit_data", "validate", "record", "promote")
TASK_EVENTS = tuple(f"task:{t}" for t in TASKS)
#: (module of faux_checks.report, function) that the gate flow (faux_checks_flows.gate_per_version) may call outside the tasks
FLOW_BODY_REPORT_HELPERS = (("build", "summarise_data"), ("schema", "load_report"), ("artifacts", "artifact_table"),
                            ("artifacts", "artifact_markdown"))


# ---------------------------------------------------------------------------- environment
def configure_environment(root: Path) -> dict[str, str]:
    """Temporary homes for faux-checks, MLflow and Prefect; telemetry off. Before any import of them."""
    home = root / "home"
    home.mkdir(parents=True)
    (root / "prefect").mkdir()
    env = {
        "FAUX_CHECKS_HOME": str(home),
        "MLFLOW_TRACKING_URI": f"sqlite:///{home / 'mlflow.db'}",
        "PREFECT_HOME": str(root / "prefect"),
        "DO_NOT_TRACK": "true",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    }
    for key in ("PREFECT_API_URL", "PREFECT_PROFILES_PATH"):
        os.environ.pop(key, None)  # never talk to a real server or profile from this benchmark
    os.environ.update(env)
    return env


# ---------------------------------------------------------------------------- timer
@dataclass(frozen=True)
class Event:
    name: str
    path: tuple[str, ...]   # enclosing timed calls, outermost first, this one last
    label: str              # phase: setup, flow, v1, v2, direct-v1, direct-gx-v1, ...
    seconds: float          # wall
    cpu: float              # CPU time of this process (all threads) over the call


class Clock:
    """Wraps functions so that each call's wall time is recorded with its nesting and phase."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.stack: list[str] = []
        self.label = "setup"
        self.server_cpu_at_start: float | None = None
        self.skipped: list[str] = []
        self._patched: list[tuple[object, str, object]] = []

    def wrap(self, name: str, fn):
        clock = self

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            clock.stack.append(name)
            path = tuple(clock.stack)
            label = clock.label
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                clock.stack.pop()
                clock.events.append(Event(name, path, label, dt, dc))

        return timed

    def patch(self, owner, attr: str, name: str, *, optional: bool = False) -> None:
        """Wrap ``owner.attr``; an ``optional`` one that does not exist (yet) is listed in ``skipped``."""
        if optional and not hasattr(owner, attr):
            self.skipped.append(name)
            return
        original = getattr(owner, attr)
        setattr(owner, attr, self.wrap(name, original))
        self._patched.append((owner, attr, original))

    def unpatch(self) -> None:
        for owner, attr, original in reversed(self._patched):
            setattr(owner, attr, original)
        self._patched.clear()

    cpu = False  # totals in CPU seconds instead of wall seconds (set by as_cpu)

    def as_cpu(self) -> "Clock":
        view = Clock.__new__(Clock)
        view.__dict__.update(self.__dict__)
        view.cpu = True
        return view

    def total(self, name: str, label: str | None = None, *, under: str | None = None,
              not_under: tuple[str, ...] = ()) -> float:
        """Summed seconds of ``name``'s calls in phase ``label`` (any phase if None), optionally
        only those nested in a ``under`` call / in none of the ``not_under`` calls."""
        out = 0.0
        for e in self.events:
            if e.name != name or (label is not None and e.label != label):
                continue
            outer = e.path[:-1]
            if under is not None and under not in outer:
                continue
            if any(n in outer for n in not_under):
                continue
            out += e.cpu if self.cpu else e.seconds
        return out

    def count(self, name: str, label: str | None = None) -> int:
        return sum(1 for e in self.events if e.name == name and (label is None or e.label == label))

    def registry_seconds(self, label: str, *, under: str | None = None) -> float:
        """Time inside Registry methods (outermost Registry call only) in one phase."""
        return sum(e.cpu if self.cpu else e.seconds for e in self.events
                   if e.label == label and e.name.startswith("Registry.")
                   and not any(n.startswith("Registry.") for n in e.path[:-1])
                   and (under is None or under in e.path[:-1]))


def timed_call(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t0, out


def proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process (Linux /proc), None if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# ---------------------------------------------------------------------------- set-up
def import_times() -> dict[str, float]:
    """Import the stack piece by piece (shared dependencies count for the first importer)."""
    out = {}
    t0 = time.perf_counter()
    import torch  # noqa: F401

    import faux_checks  # noqa: F401
    import faux_checks.gate.one_attribute  # noqa: F401
    out["torch + faux_checks"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    import mlflow  # noqa: F401

    import faux_checks.registry  # noqa: F401
    out["mlflow"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    import great_expectations  # noqa: F401

    import faux_checks_gx  # noqa: F401
    out["great_expectations + expectations"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    import prefect  # noqa: F401

    import faux_checks_flows.gate  # noqa: F401
    out["prefect + faux_checks_flows.gate"] = time.perf_counter() - t0
    return out


def build_versions(workdir: Path, *, epochs: int, seed: int, names: tuple[str, ...] = ("v1", "v2")) -> dict:
    """Adult with '?' for missing categories, the spec, v1/v2 TorchScript models, the audit CSV."""
    from faux_checks.inputs.datasets import ADULT_CATEGORICAL, ADULT_FEATURES, load_adult
    from faux_checks_app.demo import DEFAULT_BIAS_RATE, MIN_FREQUENCY, inject_historical_bias, train_target
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.inputs.tabular import FeatureSpec

    times = {}
    t0 = time.perf_counter()
    raw = load_adult(drop_missing=False)
    times["load_adult"] = time.perf_counter() - t0
    missing = {c: int(raw[c].isna().sum()) for c in raw.columns if raw[c].isna().any()}
    n_rows_missing = int(raw.isna().any(axis=1).sum())
    not_categorical = sorted(set(missing) - set(ADULT_CATEGORICAL))
    if not_categorical:
        raise SystemExit(f"missing values outside the categorical columns: {not_categorical}")
    data = raw.copy()
    for col in missing:
        data[col] = data[col].fillna("?")
    train = data[data["split"] == "train"]
    spec = FeatureSpec.fit(train, ADULT_FEATURES, min_frequency=MIN_FREQUENCY, name="adult-features-qmark")
    spec_path = spec.save(workdir / "adult-spec.json")
    X = spec.encode(train)
    y = train["income"]
    y_biased = inject_historical_bias(train, rate=DEFAULT_BIAS_RATE, seed=seed)
    versions = []
    for name, labels in (("v1", y), ("v2", y_biased)):
        if name not in names:
            continue
        t0 = time.perf_counter()
        model = train_target(X, labels.to_numpy(), epochs=epochs, seed=seed)
        times[f"train_target {name}"] = time.perf_counter() - t0
        versions.append((name, save_torchscript(model, workdir / f"{name}.pt")))
    audit = data.drop(columns="split")
    audit_path = workdir / "adult_all_qmark.csv"
    audit.to_csv(audit_path, index=False)
    return {"times": times, "missing": missing, "n_rows_missing": n_rows_missing, "n_rows": len(audit),
            "n_train": len(train), "n_features": spec.n_features, "spec_path": spec_path,
            "versions": versions, "audit_path": audit_path, "bias_rate": DEFAULT_BIAS_RATE}


def fresh_process_mlflow(uri: str) -> dict | None:
    """MLflow first use in a new process on the existing database (what every CLI call pays)."""
    code = (
        "import json, time\n"
        "import faux_checks\n"
        "t0 = time.perf_counter()\n"
        "import mlflow\n"
        "from faux_checks.registry import Registry\n"
        "t1 = time.perf_counter()\n"
        f"reg = Registry({uri!r})\n"
        "t2 = time.perf_counter()\n"
        f"reg.new_versions({MODEL_NAME!r})\n"
        "t3 = time.perf_counter()\n"
        f"reg.new_versions({MODEL_NAME!r})\n"
        "t4 = time.perf_counter()\n"
        "print(json.dumps({'import mlflow': t1 - t0, 'Registry()': t2 - t1, 'first query': t3 - t2, "
        "'second query': t4 - t3}))\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
        return json.loads(out.stdout.strip().splitlines()[-1])
    except Exception as exc:  # noqa: BLE001 - report, never fail the benchmark for this extra
        print(f"(fresh-process MLflow measurement failed: {exc})", file=sys.stderr)
        return None


# ---------------------------------------------------------------------------- instrumentation
def instrument(clock: Clock) -> None:
    import great_expectations as gx
    from prefect.server.api.server import SubprocessASGIServer

    import faux_checks_gx
    import faux_checks_gx._inputs as gx_inputs
    import faux_checks_gx.baseline_metrics as gx_baselines
    import faux_checks_gx.suite as gx_suite
    import faux_checks.gate.one_attribute as check
    import faux_checks.inputs.models as models
    import faux_checks.gate.policy as policy
    import faux_checks.registry as registry
    import faux_checks.registry.versions as registry_versions
    import faux_checks.report.artifacts as report_artifacts
    import faux_checks.report.build as report_build
    import faux_checks.report.schema as report_schema
    import faux_checks_flows.gate as gate
    import faux_checks_flows.gate_per_version as gate_one
    import faux_checks_flows.gate_tasks as gate_tasks
    from faux_checks.method.auxiliary import AuxiliaryModel
    from faux_checks.baselines import FTATester
    from faux_checks.method.faux import FAuxTester

    # Prefect task and flow bodies (the engine calls task.fn / flow.fn)
    for name in ("find_new_versions", "fetch_version", "load_audit_data", "validate", "record", "promote"):
        clock.patch(getattr(gate_tasks, name), "fn", f"task:{name}")
    clock.patch(gate.gate, "fn", "flow:gate")
    clock.patch(gate_one, "create_markdown_artifact", "prefect artifact")
    clock.patch(gate_one, "create_table_artifact", "prefect artifact", optional=True)
    original_start = SubprocessASGIServer.start

    def start(self, *args, **kwargs):
        was_running = self.running
        original_start(self, *args, **kwargs)
        if not was_running and self.server_process is not None:  # the call that started it
            clock.server_cpu_at_start = proc_cpu_seconds(self.server_process.pid)

    SubprocessASGIServer.start = functools.wraps(original_start)(start)
    clock._patched.append((SubprocessASGIServer, "start", original_start))
    clock.patch(SubprocessASGIServer, "start", "prefect server start")

    original_gate_version = gate_one.gate_version

    def gate_version(model_name, version, *args, **kwargs):
        previous, clock.label = clock.label, f"v{version}"
        try:
            return timed_gate_version(model_name, version, *args, **kwargs)
        finally:
            clock.label = previous

    timed_gate_version = clock.wrap("gate_version", original_gate_version)
    gate_one.gate_version = gate_version       # looked up by name in gate_version_leased
    clock._patched.append((gate_one, "gate_version", original_gate_version))

    # the library
    clock.patch(check, "check_one_attribute", "check_one_attribute")              # faux_checks_gx.faux imports it at call time
    clock.patch(check, "prepare_audit", "prepare_audit")      # as check_one_attribute calls it
    clock.patch(gx_inputs, "prepare_audit", "prepare_audit")  # as the GX baseline metrics call it
    clock.patch(check, "run_baselines", "run_baselines")
    clock.patch(check.CheckResult, "to_dict", "CheckResult.to_dict")
    clock.patch(AuxiliaryModel, "fit", "AuxiliaryModel.fit")
    clock.patch(FAuxTester, "evaluate", "FAuxTester.evaluate")
    clock.patch(FTATester, "score", "FTATester.score")
    clock.patch(gx_inputs, "load_model", "load_model")
    clock.patch(models, "model_sha256", "model_sha256")       # faux_checks_flows.gate imports it at call time
    clock.patch(registry_versions, "model_sha256", "model_sha256")  # the download's check
    clock.patch(policy, "load_policy", "load_policy")
    clock.patch(report_build, "write_report", "write_report")
    # report helpers the flow body may call outside any task (library work, counted as recording)
    for module, helper in FLOW_BODY_REPORT_HELPERS:
        clock.patch({"build": report_build, "schema": report_schema, "artifacts": report_artifacts}[module], helper,
                    helper, optional=True)

    # Great Expectations
    clock.patch(faux_checks_gx, "build_suite", "build_suite")
    clock.patch(faux_checks_gx, "validate_frame", "validate_frame")
    clock.patch(gx_suite, "_run_gx", "_run_gx")
    clock.patch(gx, "get_context", "gx.get_context")
    clock.patch(gx_baselines, "audit_inputs", "audit_inputs")
    clock.patch(gx_baselines, "_group_metric", "_group_metric")

    # MLflow (the registry adapter): every public method, counted once at the outermost call
    for meth in ["__init__", *sorted(m for m in vars(registry.Registry)
                                     if not m.startswith("_") and callable(getattr(registry.Registry, m)))]:
        clock.patch(registry.Registry, meth, f"Registry.{meth}")


# ---------------------------------------------------------------------------- analysis
def version_split(clock: Clock, label: str) -> dict[str, float]:
    c = clock
    wall = c.total("gate_version", label)
    fetch = c.total("task:fetch_version", label)
    sha_flow = c.total("model_sha256", label, not_under=("task:fetch_version",))
    model_load = c.total("load_model", label)
    validate = c.total("task:validate", label)
    rc = c.total("check_one_attribute", label)
    prep = c.total("prepare_audit", label, under="check_one_attribute")
    aux = c.total("AuxiliaryModel.fit", label, under="check_one_attribute")
    scoring = c.total("FAuxTester.evaluate", label, under="check_one_attribute")
    baselines = c.total("run_baselines", label, under="check_one_attribute")
    record = c.total("task:record", label)
    promote = c.total("task:promote", label)
    report_in_flow = sum(c.total(h, label, not_under=TASK_EVENTS) for _, h in FLOW_BODY_REPORT_HELPERS)
    load = fetch + sha_flow + model_load
    gx_over = validate - rc - model_load
    prefect = wall - fetch - validate - record - promote - sha_flow - report_in_flow
    return {
        "wall": wall, "load": load, "prepare": prep, "aux_fit": aux, "scoring": scoring, "baselines": baselines,
        "check_other": rc - prep - aux - scoring - baselines, "check_one_attribute": rc, "gx_overhead": gx_over,
        "recording": record + promote + report_in_flow, "prefect": prefect, "report_in_flow": report_in_flow,
        # details
        "fetch_task": fetch, "flow_sha256": sha_flow, "model_load": model_load, "validate_task": validate,
        "mlflow": c.registry_seconds(label),
        "gx_dup_fta": c.total("FTATester.score", label, not_under=("check_one_attribute",)),
        "gx_dup_group_metrics": c.total("_group_metric", label),
        "gx_dup_audit_inputs_fta": c.total("audit_inputs", label, not_under=("_group_metric",)),
        "gx_dup_prepare_audit": c.total("prepare_audit", label, under="audit_inputs"),
        "gx_to_dict": c.total("CheckResult.to_dict", label),
        "gx_context": c.total("gx.get_context", label),
        "gx_build_suite": c.total("build_suite", label) + c.total("load_policy", label),
        "gx_prepare_calls": float(sum(1 for e in c.events if e.label == label and e.name == "prepare_audit")),
        "rec_write_report": c.total("write_report", label),
        "rec_mlflow": c.registry_seconds(label, under="task:record") + c.registry_seconds(label, under="task:promote"),
        "rec_log_gate_run": c.total("Registry.log_gate_run", label),
        "rec_record_decision": c.total("Registry.record_decision", label),
        "rec_promote": c.total("Registry.promote", label),
        "rec_registry_init": c.total("Registry.__init__", label, under="task:record")
        + c.total("Registry.__init__", label, under="task:promote"),
        "fetch_registry_init": c.total("Registry.__init__", label, under="task:fetch_version"),
        "fetch_mark_running": c.total("Registry.mark_running", label),
        "fetch_download": c.total("Registry.download", label),
        "prefect_artifact": c.total("prefect artifact", label),
    }


def gx_breakdown(s: dict) -> dict[str, float]:
    dup = s["gx_dup_fta"] + s["gx_dup_group_metrics"] + s["gx_dup_audit_inputs_fta"]
    known = dup + s["gx_to_dict"] + s["gx_context"] + s["gx_build_suite"]
    return {"duplicated baselines (prepare_audit twice more, FTA, DP)": dup,
            "  of which prepare_audit re-encoding": s["gx_dup_prepare_audit"],
            "CheckResult.to_dict (needed for the report anyway)": s["gx_to_dict"],
            "gx.get_context (ephemeral context)": s["gx_context"],
            "load_policy + build_suite": s["gx_build_suite"],
            "rest of GX (suite, validation definition, metrics graph, result)": s["gx_overhead"] - known}


def fmt(x: float) -> str:
    return f"{x:8.2f}"


def print_table(rows: list[tuple[str, dict]], cols: list[tuple[str, str]]) -> None:
    head = f"{'':<18}" + "".join(f"{title:>11}" for _, title in cols)
    print(head)
    print("-" * len(head))
    for name, vals in rows:
        cells = "".join(f"{vals[k]:>11.2f}" if isinstance(vals.get(k), (int, float)) else f"{'':>11}" for k, _ in cols)
        print(f"{name:<18}{cells}")


# ---------------------------------------------------------------------------- main
def flow_analysis(clock: Clock, labels: list[str], flow_total: float, server_cpu: float = 0.0) -> dict:
    """Per-version split and flow-level overhead, in wall seconds (``clock``) or CPU seconds (a
    CPU view of it, ``flow_total`` = this process's CPU time and ``server_cpu`` = the Prefect
    server subprocess's CPU time, counted as Prefect overhead)."""
    splits = {lab: version_split(clock, lab) for lab in labels}
    task_bodies = sum(clock.total(t, "flow") + sum(clock.total(t, lab) for lab in labels) for t in TASK_EVENTS)
    flow_sha = sum(s["flow_sha256"] + s["report_in_flow"] for s in splits.values())
    prefect_inproc = flow_total - task_bodies - flow_sha
    shared = {"find_new_versions": clock.total("task:find_new_versions", "flow"),
              "load_audit_data": clock.total("task:load_audit_data", "flow")}
    shared_prefect = prefect_inproc - sum(s["prefect"] for s in splits.values())
    total = flow_total + server_cpu
    mlflow = sum(clock.registry_seconds(lab) for lab in ["flow", *labels])
    gx = sum(s["gx_overhead"] for s in splits.values())
    prefect = prefect_inproc + server_cpu
    server_start = clock.total("prefect server start")
    overhead = gx + prefect + mlflow
    return {
        "versions": splits, "task_bodies": task_bodies, "flow_body_library": flow_sha, "prefect_in_process": prefect_inproc,
        "server_process_cpu": server_cpu, "prefect": prefect, "shared": shared, "shared_prefect": shared_prefect,
        "shared_total": flow_total - sum(s["wall"] for s in splits.values()), "total": total, "mlflow": mlflow,
        "gx_overhead": gx, "server_start": server_start, "flow_body": clock.total("flow:gate"),
        "artifacts": sum(s["prefect_artifact"] for s in splits.values()), "overhead": overhead,
        "per_version": total / len(labels), "overhead_share": overhead / total,
        "overhead_share_without_server_start": (overhead - server_start) / (total - server_start),
    }


SPLIT_COLS = [("load", "load"), ("prepare", "prepare"), ("aux_fit", "aux fit"), ("scoring", "scoring"),
              ("baselines", "baselines"), ("check_other", "chk other"), ("gx_overhead", "GX over"),
              ("recording", "recording"), ("prefect", "Prefect"), ("wall", "total")]


def print_split(a: dict, labels: list[str]) -> None:
    rows = [(f"version {lab}", a["versions"][lab]) for lab in labels]
    shared = {"load": a["shared"]["load_audit_data"] + a["shared"]["find_new_versions"],
              "prefect": a["shared_prefect"], "wall": a["shared_total"]}
    rows.append(("shared (flow)", shared))
    if a["server_process_cpu"]:
        rows.append(("server process", {"prefect": a["server_process_cpu"], "wall": a["server_process_cpu"]}))
    tot = {k: sum((r[1].get(k) or 0.0) for r in rows) for k, _ in SPLIT_COLS}
    rows.append(("flow total", tot))
    print_table(rows, SPLIT_COLS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20, help="target training epochs (demo: 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    parser.add_argument("--skip-direct", action="store_true", help="skip the direct check_one_attribute / validate_frame runs")
    parser.add_argument("--json", type=Path, default=None, help="write every number here")
    parser.add_argument("--keep", type=Path, default=None, help="keep the registry, reports and Prefect home here")
    parser.add_argument("--cli", action="store_true", help="one-version `faux-checks gate` subprocess wall vs flow time")
    parser.add_argument("--compare-with", type=Path, default=None, metavar="CHECKOUT",
                        help="--cli: also run the commands with this checkout (git archive of another commit)")
    parser.add_argument("--repeats", type=int, default=1, help="--cli: rounds of (gate, re-gate) per checkout")
    args = parser.parse_args(argv)
    if args.cli:
        return cli_main(args)

    root = Path(tempfile.mkdtemp(prefix="bench-gate-")) if args.keep is None else args.keep.resolve()
    if args.keep is not None:
        if root.exists() and any(root.iterdir()):
            raise SystemExit(f"--keep {root} is not empty")
        root.mkdir(parents=True, exist_ok=True)
    env = configure_environment(root)
    # every temporary file of this run (GX's ephemeral docs folder per validation, the flow's
    # download folder) goes under root, which is removed at the end
    (root / "tmp").mkdir()
    tempfile.tempdir = os.environ["TMPDIR"] = str(root / "tmp")
    warnings.filterwarnings("ignore", message=r".*torch\.jit.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    load_before = os.getloadavg()
    results: dict = {"env": env, "loadavg_before": load_before}
    try:
        imports = import_times()
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        clock = Clock()
        instrument(clock)

        # ---- set-up: data, models, registration (not gated work)
        work = root / "models"
        work.mkdir()
        setup = build_versions(work, epochs=args.epochs, seed=args.seed)
        from faux_checks.registry import Registry

        uri = env["MLFLOW_TRACKING_URI"]
        t_init, reg = timed_call(Registry, uri)
        reg_times = {"Registry() first (new sqlite db)": t_init}
        registered = []
        for name, path in setup["versions"]:
            dt, number = timed_call(reg.register_version, MODEL_NAME, path, setup["spec_path"],
                                    description=f"bench {name}", tags={"bench_recipe": name})
            reg_times[f"register_version {name}"] = dt
            registered.append(number)
        fresh = fresh_process_mlflow(uri)

        # ---- the gate: one flow run, two versions (the first flow call starts the API server)
        from faux_checks_flows.gate import gate
        from prefect.server.api.server import SubprocessASGIServer

        clock.label = "flow"
        cpu0, t0 = time.process_time(), time.perf_counter()
        state = gate(model_name=MODEL_NAME, data_path=str(setup["audit_path"]), tracking_uri=uri,
                     report_root=str(Path(env["FAUX_CHECKS_HOME"]) / "reports"), return_state=True)
        flow_wall, flow_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        clock.label = "after"
        server = SubprocessASGIServer()
        server_cpu = (proc_cpu_seconds(server.server_process.pid) if server.server_process else None) or 0.0
        outcomes = state.result(raise_on_failure=False)
        outcomes = outcomes if isinstance(outcomes, list) else []
        decisions = {str(o.get("version")): o.get("decision") for o in outcomes if isinstance(o, dict)}
        flagged = {str(o.get("version")): o.get("flagged_fraction") for o in outcomes if isinstance(o, dict)}
        labels = [f"v{n}" for n in registered]
        wall = flow_analysis(clock, labels, flow_wall)
        cpu = flow_analysis(clock.as_cpu(), labels, flow_cpu, server_cpu)

        # ---- direct runs outside Prefect, same DataFrame
        direct = {}
        if not args.skip_direct:
            import faux_checks_gx._inputs as gx_inputs
            from faux_checks_gx import build_suite, validate_frame
            from faux_checks.gate.one_attribute import check_one_attribute
            from faux_checks.inputs.io import read_table
            from faux_checks.inputs.models import load_model
            from faux_checks.gate.policy import load_policy
            from faux_checks.inputs.tabular import FeatureSpec

            frame = read_table(setup["audit_path"])
            policy = load_policy()
            spec = FeatureSpec.load(setup["spec_path"])
            for (_name, path), number in zip(setup["versions"], registered, strict=True):   # registered: one per version
                lab = f"v{number}"
                d, g = f"direct-{lab}", f"direct-gx-{lab}"
                model = load_model(path)
                clock.label = d
                t_rc, res = timed_call(check_one_attribute, model, frame, policy=policy, feature_spec=spec)
                gx_inputs._load_model_cached.cache_clear()
                clock.label = g
                suite = build_suite(policy, model_path=str(path), feature_spec_path=str(setup["spec_path"]))
                t_vf, outcome = timed_call(validate_frame, frame, suite)
                clock.label = "after"
                row = {"check_one_attribute": t_rc, "validate_frame": t_vf, "gx_overhead": t_vf - t_rc}
                for key, (fn, under) in {"prepare": ("prepare_audit", "check_one_attribute"), "aux_fit": ("AuxiliaryModel.fit", None),
                                         "scoring": ("FAuxTester.evaluate", None),
                                         "baselines": ("run_baselines", None)}.items():
                    row[key] = clock.total(fn, d, under=under)
                    row[f"{key}_in_gx"] = clock.total(fn, g, under="check_one_attribute")
                row["check_other"] = t_rc - row["prepare"] - row["aux_fit"] - row["scoring"] - row["baselines"]
                row["model_load_in_gx"] = clock.total("load_model", g)
                row["dup_baselines_in_gx"] = (clock.total("FTATester.score", g, not_under=("check_one_attribute",))
                                              + clock.total("_group_metric", g)
                                              + clock.total("audit_inputs", g, not_under=("_group_metric",)))
                row["to_dict_in_gx"] = clock.total("CheckResult.to_dict", g)
                row["gx_context"] = clock.total("gx.get_context", g)
                # the aux model is trained afresh in both calls (same seed, same work): remove its wall-time noise
                row["gx_overhead_fit_corrected"] = row["gx_overhead"] - (row["aux_fit_in_gx"] - row["aux_fit"])
                row["cpu_check_one_attribute"] = clock.as_cpu().total("check_one_attribute", d)
                row["cpu_validate_frame"] = clock.as_cpu().total("validate_frame", g)
                row["cpu_gx_overhead"] = row["cpu_validate_frame"] - row["cpu_check_one_attribute"] - (
                    clock.as_cpu().total("AuxiliaryModel.fit", g) - clock.as_cpu().total("AuxiliaryModel.fit", d))
                row["cpu_aux_fit"] = clock.as_cpu().total("AuxiliaryModel.fit", d)
                row.update(decision=res.decision, flagged_fraction=res.flagged_fraction, gx_decision=outcome.decision)
                direct[lab] = row
        clock.unpatch()

        # ---- Prefect server start again, on the PREFECT_HOME database the first start created
        restart = None
        if SubprocessASGIServer._instances:
            _stop_prefect_server()
            again = SubprocessASGIServer()
            restart_wall, _ = timed_call(again.start)
            restart = {"wall": restart_wall,
                       "server_cpu": proc_cpu_seconds(again.server_process.pid) if again.server_process else None}
            _stop_prefect_server()
        load_after = os.getloadavg()

        # ---- report
        print("fairness gate benchmark: UCI Adult, all individuals, one flow run gating "
              f"{len(labels)} model versions")
        print(f"machine: {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, python "
              f"{sys.version.split()[0]}; load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
              "(other processes stretch wall time: compare the CPU-second table)")
        miss = ", ".join(f"{c} {n:,}" for c, n in setup["missing"].items())
        print(f"data: load_adult(drop_missing=False), {setup['n_rows']:,} rows audited; missing values ({miss}; "
              f"{setup['n_rows_missing']:,} rows) replaced by the explicit level '?' in a copy, FeatureSpec fitted on "
              f"that copy's {setup['n_train']:,} training rows ({setup['n_features']} encoded features, "
              "min_frequency=50)")
        print(f"models: TargetMLP(64,64), train_target {args.epochs} epochs seed {args.seed}; v1 recorded labels, "
              f"v2 historical bias rate {setup['bias_rate']}; neither takes sex; shipped default policy")
        print("decisions: " + ", ".join(f"v{v} {dec} (flagged {flagged.get(v)!s:.6})" for v, dec in decisions.items())
              + f"; flow state {state.type.value if hasattr(state.type, 'value') else state.type}")
        if clock.skipped:
            print(f"not timed (absent in this checkout): {sorted(set(clock.skipped))}")
        print()
        print("one-time costs per process (wall s; not in the per-version rows unless said)")
        for k, v in imports.items():
            print(f"  import {k:<50}{fmt(v)}")
        for k, v in setup["times"].items():
            print(f"  set-up {k:<50}{fmt(v)}")
        for k, v in reg_times.items():
            print(f"  MLflow {k:<50}{fmt(v)}")
        if fresh:
            print("  MLflow in a fresh process on the existing db: " + ", ".join(
                f"{k} {v:.2f}" for k, v in fresh.items()))
        print(f"  Prefect ephemeral server start, first flow call, fresh PREFECT_HOME {fmt(wall['server_start'])}"
              f"  (inside the flow, 'shared' row); server subprocess CPU at ready {clock.server_cpu_at_start or 0:.2f} s")
        if restart:
            print(f"  Prefect server start again, existing PREFECT_HOME db (after the flow)  {fmt(restart['wall'])}"
                  f"  server subprocess CPU at ready {restart['server_cpu'] or 0:.2f} s")
        print()
        print("wall seconds per model version inside the one flow run")
        print_split(wall, labels)
        print("CPU seconds (this process, all threads; the Prefect server subprocess on its own row)")
        print_split(cpu, labels)
        print("  load = fetch_version task (mark running, registry download, sha256 check) + flow sha256 + model load;")
        print("  prepare .. chk other = check_one_attribute's parts (prepare_audit, AuxiliaryModel.fit, FAuxTester.evaluate,")
        print("  run_baselines, rest); GX over = validate task body - check_one_attribute - model load; recording = record task")
        print("  (report.json/html, MLflow run, version tags) + promote + report helpers the flow body calls; Prefect =")
        print("  total - task bodies - library work in the flow body (sha256, report helpers);")
        print(f"  shared = once per flow run: find_new_versions task {wall['shared']['find_new_versions']:.2f} s and "
              f"load_audit_data (CSV) {wall['shared']['load_audit_data']:.2f} s under load, flow-level Prefect work;")
        print("  overhead (below) = GX over + Prefect + MLflow, whose calls sit inside load and recording")
        print()
        print("GX overhead per version, wall s")
        for lab in labels:
            print(f"  {lab}: " + "; ".join(f"{k} {v:.2f}" for k, v in gx_breakdown(wall["versions"][lab]).items()))
        print("recording per version, wall s")
        for lab in labels:
            s = wall["versions"][lab]
            rest = s["recording"] - s["rec_write_report"] - s["rec_mlflow"] - s["report_in_flow"]
            print(f"  {lab}: write_report (json + html with plots) {s['rec_write_report']:.2f}; MLflow "
                  f"{s['rec_mlflow']:.2f} (log_gate_run {s['rec_log_gate_run']:.2f}, record_decision "
                  f"{s['rec_record_decision']:.2f}, promote {s['rec_promote']:.2f}, Registry() "
                  f"{s['rec_registry_init']:.2f}); report helpers in the flow body {s['report_in_flow']:.2f}; "
                  f"rest {rest:.2f}")
        print("load per version, wall s")
        for lab in labels:
            s = wall["versions"][lab]
            print(f"  {lab}: Registry() {s['fetch_registry_init']:.2f}; mark_running {s['fetch_mark_running']:.2f}; "
                  f"download {s['fetch_download']:.2f}; flow sha256 {s['flow_sha256']:.2f}; model load "
                  f"{s['model_load']:.2f}")
        print("Prefect overhead, wall s")
        print(f"  flow wall {flow_wall:.2f} - task bodies {wall['task_bodies']:.2f} - library work in the flow body "
              f"{wall['flow_body_library']:.2f} = {wall['prefect']:.2f}: ephemeral server start {wall['server_start']:.2f}, "
              f"rest of the flow engine outside the flow body {flow_wall - wall['flow_body'] - wall['server_start']:.2f}, "
              "per version " + ", ".join(f"{lab} {wall['versions'][lab]['prefect']:.2f}" for lab in labels)
              + f" (Prefect artifacts {wall['artifacts']:.2f})")
        print(f"  CPU: this process {flow_cpu:.2f} CPU s in the flow's {flow_wall:.2f} s wall; the server subprocess "
              f"{server_cpu:.2f} CPU s (start + serving the flow's API calls)")
        print(f"MLflow, all Registry calls inside the flow: {wall['mlflow']:.2f} s wall, {cpu['mlflow']:.2f} CPU s")
        print()
        if direct:
            print("direct, outside Prefect, same DataFrame, wall s: GX overhead = validate_frame - check_one_attribute; GX fitcorr"
                  " and GX CPU s remove the difference between the two aux fits (same seed, same work)")
            dcols = [("prepare", "prepare"), ("aux_fit", "aux fit"), ("scoring", "scoring"),
                     ("baselines", "baselines"), ("check_other", "chk other"), ("check_one_attribute", "check_one_attribute"),
                     ("validate_frame", "validate"), ("gx_overhead", "GX over"),
                     ("gx_overhead_fit_corrected", "GX fitcorr"), ("cpu_aux_fit", "fit CPU s"),
                     ("cpu_gx_overhead", "GX CPU s")]
            print_table([(f"version {lab}", row) for lab, row in direct.items()], dcols)
            for lab, row in direct.items():
                print(f"  {lab}: aux fit {row['aux_fit']:.2f} s in check_one_attribute vs {row['aux_fit_in_gx']:.2f} s inside "
                      f"validate_frame (same seed, same work: wall-time noise); fit-corrected GX overhead "
                      f"{row['gx_overhead_fit_corrected']:.2f} = duplicated baselines {row['dup_baselines_in_gx']:.2f} "
                      f"+ model load {row['model_load_in_gx']:.2f} + to_dict {row['to_dict_in_gx']:.2f} + context "
                      f"{row['gx_context']:.2f} + rest; decisions check_one_attribute {row['decision']} / GX {row['gx_decision']}")
            print()
        print(f"overhead (wall) = GX {wall['gx_overhead']:.2f} + Prefect {wall['prefect']:.2f} + MLflow "
              f"{wall['mlflow']:.2f} = {wall['overhead']:.2f} s of the flow's {flow_wall:.2f} s: "
              f"{wall['overhead_share']:.1%} ({wall['overhead_share_without_server_start']:.1%} without the one-time "
              "server start)")
        print(f"overhead (CPU)  = GX {cpu['gx_overhead']:.2f} + Prefect {cpu['prefect']:.2f} (server subprocess "
              f"{server_cpu:.2f}) + MLflow {cpu['mlflow']:.2f} = {cpu['overhead']:.2f} CPU s of {cpu['total']:.2f}: "
              f"{cpu['overhead_share']:.1%}")
        per_version, share = wall["per_version"], wall["overhead_share"]
        print(f"goals: {per_version:.2f} s per version <= {GOAL_PER_VERSION_S:g} s: "
              f"{'met' if per_version <= GOAL_PER_VERSION_S else 'NOT met'}; overhead {share:.1%} <= "
              f"{GOAL_OVERHEAD_SHARE:.0%}: {'met' if share <= GOAL_OVERHEAD_SHARE else 'NOT met'} (wall, server start "
              f"included; per version = flow wall / {len(labels)})")
        results.update({"imports": imports, "loadavg_after": load_after,
                        "setup": {k: setup[k] for k in ("times", "missing", "n_rows", "n_rows_missing", "n_features")},
                        "registration": reg_times, "fresh_process_mlflow": fresh, "flow_wall": flow_wall,
                        "flow_cpu": flow_cpu, "server_cpu": server_cpu, "server_cpu_at_start": clock.server_cpu_at_start,
                        "server_restart": restart, "wall": wall, "cpu": cpu, "direct": direct,
                        "decisions": decisions, "per_version_s": per_version, "overhead_share": share})
        if args.json:
            args.json.write_text(json.dumps(results, indent=2, default=str))
        print(f"per_version_s={per_version:.2f} overhead_share={share:.3f}")
        return 0
    finally:
        _stop_prefect_server()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------- --cli: what a user waits for
#: Runs the CLI in the subprocess with the flow body timed (stderr line ``BENCH_FLOW_S=<s>``); argv follows.
_CLI_RUNNER = '''
import functools, sys, time
from faux_checks.settings import configure_environment
configure_environment()
import faux_checks_flows.gate as g
body = g.gate.fn
@functools.wraps(body)
def timed(*a, **k):
    t0 = time.perf_counter()
    try:
        return body(*a, **k)
    finally:
        print(f"BENCH_FLOW_S={time.perf_counter() - t0:.3f}", file=sys.stderr, flush=True)
g.gate.fn = timed
from faux_checks_app.cli import main
sys.exit(main(sys.argv[1:]))
'''
_PLAIN_RUNNER = "import sys\nfrom faux_checks_app.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def _cli(checkout: Path, root: Path, argv: list[str], *, timed_flow: bool) -> dict:
    """One CLI command with ``checkout``'s code in a fresh interpreter: wall, exit code, flow body seconds."""
    import re

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "FAUX_CHECKS_DEVICE"))}
    env.update(configure_environment_env(root), PYTHONPATH=str(checkout))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CLI_RUNNER if timed_flow else _PLAIN_RUNNER, *argv], cwd=str(root),
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    found = re.findall(r"BENCH_FLOW_S=([0-9.]+)", proc.stderr)
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr[-4000:])
    return {"wall_s": wall, "rc": proc.returncode, "flow_s": float(found[-1]) if found else None}


def configure_environment_env(root: Path) -> dict[str, str]:
    """The variables :func:`configure_environment` sets for ``root``, without touching this process."""
    home = root / "home"
    return {"FAUX_CHECKS_HOME": str(home), "MLFLOW_TRACKING_URI": f"sqlite:///{home / 'mlflow.db'}",
            "PREFECT_HOME": str(root / "prefect"), "DO_NOT_TRACK": "true", "MLFLOW_DISABLE_TELEMETRY": "true",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
            "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false", "TMPDIR": str(root / "tmp")}


def cli_main(args) -> int:
    """``--cli``: per checkout and round, a fresh registry; register v1, gate it, re-gate it (--force)."""
    base = Path(tempfile.mkdtemp(prefix="bench-gate-cli-"))
    try:
        work = base / "models"
        work.mkdir()
        setup = build_versions(work, epochs=args.epochs, seed=args.seed, names=("v1",))
        model_path = setup["versions"][0][1]
        checkouts = [("this", REPO)] + ([("before", args.compare_with.resolve())] if args.compare_with else [])
        rows = []
        for r in range(args.repeats):
            for label, checkout in (checkouts[::-1] if args.compare_with else checkouts):
                root = base / f"{label}-{r}"
                for sub in ("home", "prefect", "tmp"):
                    (root / sub).mkdir(parents=True)
                uri = configure_environment_env(root)["MLFLOW_TRACKING_URI"]
                common = ["--data", str(setup["audit_path"]), "--tracking-uri", uri]
                reg = _cli(checkout, root, ["register", MODEL_NAME, "--model", str(model_path), "--feature-spec",
                                            str(setup["spec_path"]), "--tracking-uri", uri], timed_flow=False)
                first = _cli(checkout, root, ["gate", MODEL_NAME, *common], timed_flow=True)
                again = _cli(checkout, root, ["gate", MODEL_NAME, *common, "--version", "1", "--force"], timed_flow=True)
                for what, res in (("gate", first), ("re-gate", again)):
                    ratio = res["wall_s"] / res["flow_s"] if res["flow_s"] else float("nan")
                    rows.append({"checkout": label, "round": r, "command": what, **res, "ratio": ratio,
                                 "register_wall_s": reg["wall_s"]})
                    print(f"{label:7s} round {r} {what:8s} rc={res['rc']} wall {res['wall_s']:6.2f} s  flow "
                          f"{res['flow_s'] or float('nan'):6.2f} s  wall/flow {ratio:5.2f}  (load {os.getloadavg()[0]:.1f})",
                          flush=True)
        if args.json:
            args.json.write_text(json.dumps({"rows": rows, "setup": setup["times"]}, indent=2, default=str))
        mine = [x for x in rows if x["checkout"] == "this" and x["command"] == "gate"]
        best = min(mine, key=lambda x: x["wall_s"])
        print(f"cli_wall_s={best['wall_s']:.2f} flow_s={best['flow_s'] or float('nan'):.2f} ratio={best['ratio']:.2f}")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _stop_prefect_server() -> None:
    """Stop the ephemeral API server this process started (before its home folder is removed)."""
    server_mod = sys.modules.get("prefect.server.api.server")
    if server_mod is None:
        return
    for server in list(server_mod.SubprocessASGIServer._instances.values()):
        if server.server_process is not None:
            server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
