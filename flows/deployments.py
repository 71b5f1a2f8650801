"""Prefect deployments of the faux-checks flows, with their schedules, defined in the repository.

- ``fairness-audit/<model>``: the drift audit of the deployed version on the current batch, on a
  cron schedule (default daily at 03:00 UTC). The batch path is a parameter: point it at the
  file your pipeline refreshes (e.g. ``/data/scoring/latest.parquet``).
- ``fairness-gate/<model>``: the gate polling for new versions (default every 15 minutes).

Serve them with a long-running process (no work pool needed)::

    python -m faux_checks_flows.deployments --model adult-income --data /data/latest.parquet \\
        --gate-data /data/audit.csv --audit-cron "0 3 * * *"

One run at a time per deployment (:data:`CONCURRENCY`): a run scheduled while the previous one still runs is
cancelled (Prefect's ``CANCEL_NEW`` collision strategy; it shows as Cancelled in the UI), never queued. Each
audit reads the file at ``data_path`` as it is when the run starts, so a queued run would only audit the same
or a newer batch later, and with runs longer than the interval the queue would grow by one run per interval;
the next scheduled run after the current one ends reads the newest batch. The gate polls for new versions, so
a skipped poll loses nothing. Audits are also recorded in the order of their data, not of their finish
(:mod:`faux_checks.registry.audit_order`).

``serve`` needs a Prefect API (``prefect server start``, or ``PREFECT_API_URL`` pointing at one);
building the deployments (:func:`build_deployments`) needs none, which is what the tests check.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from typing import Sequence

from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
from prefect.schedules import Cron

from .common import slug

__all__ = ["CONCURRENCY", "STOP_GRACE_S", "audit_deployment", "build_deployments", "end_children", "gate_deployment", "main",
           "serve_bounded"]

DEFAULT_AUDIT_CRON = "0 3 * * *"
DEFAULT_GATE_CRON = "*/15 * * * *"
TAGS = ["faux-checks", "fairness"]
#: Each deployment's concurrency limit: one run at a time, a run due while one runs cancelled (module docstring).
CONCURRENCY = ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW)


def audit_deployment(model_name: str, data_path: str, *, cron: str = DEFAULT_AUDIT_CRON, timezone: str = "UTC",
                     reference_path: str | None = None, policy_path: str | None = None,
                     tracking_uri: str | None = None, alias: str = "deployable", report_root: str | None = None):
    """The scheduled drift audit of ``model_name`` (a ``RunnerDeployment``; nothing is contacted).

    Parameters mirror :func:`faux_checks_flows.audit.audit`; ``cron`` and ``timezone`` set the schedule. One run
    at a time (:data:`CONCURRENCY`: a run due while one runs is cancelled).
    """
    from faux_checks_flows.audit import audit

    return audit.to_deployment(
        name=f"fairness-audit-{slug(model_name)}",
        schedule=Cron(cron, timezone=timezone),
        parameters={"model_name": model_name, "data_path": data_path, "reference_path": reference_path,
                    "policy_path": policy_path, "tracking_uri": tracking_uri, "alias": alias,
                    "report_root": report_root},
        description=f"Drift audit of the '{alias}' version of {model_name} on {data_path} (faux-checks)",
        tags=TAGS + ["audit"],
        concurrency_limit=CONCURRENCY,
    )


def gate_deployment(model_name: str, data_path: str, *, cron: str = DEFAULT_GATE_CRON, timezone: str = "UTC",
                    policy_path: str | None = None, tracking_uri: str | None = None, alias: str = "deployable",
                    report_root: str | None = None):
    """The gate of ``model_name`` polling for new versions (a ``RunnerDeployment``; one run at a time, :data:`CONCURRENCY`)."""
    from faux_checks_flows.gate import gate

    return gate.to_deployment(
        name=f"fairness-gate-{slug(model_name)}",
        schedule=Cron(cron, timezone=timezone),
        parameters={"model_name": model_name, "data_path": data_path, "policy_path": policy_path,
                    "tracking_uri": tracking_uri, "alias": alias, "report_root": report_root},
        description=f"Fairness gate of new versions of {model_name} on {data_path} (faux-checks)",
        tags=TAGS + ["gate"],
        concurrency_limit=CONCURRENCY,
    )


def build_deployments(args: argparse.Namespace) -> list:
    """The deployments named by the command line: the audit always, the gate with ``--gate-data``."""
    common = {"policy_path": args.policy, "tracking_uri": args.tracking_uri, "alias": args.alias,
              "report_root": args.report_dir, "timezone": args.timezone}
    out = [audit_deployment(args.model, args.data, cron=args.audit_cron, reference_path=args.reference, **common)]
    if args.gate_data:
        out.append(gate_deployment(args.model, args.gate_data, cron=args.gate_cron, **common))
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m faux_checks_flows.deployments", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="registered model name")
    p.add_argument("--data", required=True, help="current batch the audit reads at each run (CSV/Parquet)")
    p.add_argument("--reference", help="reference batch (default: the data the version was gated on)")
    p.add_argument("--gate-data", help="audit data of the gate; also serve the gate deployment")
    p.add_argument("--policy", help="policy TOML")
    p.add_argument("--tracking-uri", help="MLflow URI")
    p.add_argument("--alias", default="deployable")
    p.add_argument("--report-dir", help="root folder for reports")
    p.add_argument("--audit-cron", default=DEFAULT_AUDIT_CRON, help=f"default {DEFAULT_AUDIT_CRON!r}")
    p.add_argument("--gate-cron", default=DEFAULT_GATE_CRON, help=f"default {DEFAULT_GATE_CRON!r}")
    p.add_argument("--timezone", default="UTC")
    p.add_argument("--dry-run", action="store_true", help="print the deployments and exit (no server)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Build the deployments and serve them (blocks until interrupted); ``--dry-run`` only prints."""
    args = _parser().parse_args(argv)
    deployments = build_deployments(args)
    for d in deployments:
        cron = ", ".join(getattr(s.schedule, "cron", str(s.schedule)) for s in d.schedules or [])
        strategy = getattr(getattr(d.concurrency_options, "collision_strategy", None), "value", None)
        print(f"{d.flow_name}/{d.name}: cron {cron!r}, at most {d.concurrency_limit} run at a time ({strategy}), "
              f"parameters {d.parameters}")
    if args.dry_run:
        return 0
    serve_bounded(*deployments)
    return 0


#: Seconds ``serve`` gives Prefect's own shutdown after SIGTERM before its flow-run processes are ended.
STOP_GRACE_S = 10.0
#: Seconds a flow-run process gets after SIGTERM before SIGKILL.
TERMINATE_WAIT_S = 3.0


def end_children(wait_s: float = TERMINATE_WAIT_S) -> list[int]:
    """Terminate every child process of this one (recursively: the flow runs ``serve`` started), kill those
    still alive after ``wait_s`` seconds; return their pids. Requires psutil (it comes with distributed)."""
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=wait_s)
    for child in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(alive, timeout=1.0)
    return [c.pid for c in children]


def serve_bounded(*deployments, grace_s: float = STOP_GRACE_S) -> None:
    """Prefect's ``serve`` of ``deployments``, whose SIGTERM ends the process within ``grace_s`` +
    :data:`TERMINATE_WAIT_S` + 1 s and leaves no flow-run process behind.

    Prefect's runner answers SIGTERM by cancelling its flow runs and stopping its loops; a flow run busy in
    native code, or an API that does not answer, held that shutdown for 40 s and more and left the flow-run
    subprocesses running. Here the runner's handler is kept and a watchdog thread ends the children and the
    process (exit 143) if Prefect's shutdown has not returned after ``grace_s``. A flow run ended this way is
    left ``Running`` in Prefect until a faux-checks command marks it ``Crashed``
    (:mod:`faux_checks_app.orphan_runs` does that for the command line's own runs).
    """
    import asyncio

    from prefect.runner import Runner

    class BoundedRunner(Runner):
        def handle_sigterm(self, *args, **kwargs):
            threading.Thread(target=_watchdog, args=(grace_s,), name="faux-checks-serve-stop", daemon=True).start()
            super().handle_sigterm(*args, **kwargs)

    runner = BoundedRunner(pause_on_shutdown=True)
    for deployment in deployments:
        runner.add_deployment(deployment)
    try:
        asyncio.run(runner.start())
    except KeyboardInterrupt:
        pass
    end_children()


def _watchdog(grace_s: float) -> None:
    """After ``grace_s``: end the children and the process (Prefect's shutdown did not return in time)."""
    time.sleep(grace_s)
    end_children()
    os._exit(128 + signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
