"""The Dask task runner of the sharded flow (:mod:`faux_checks_flows.shard`): a running scheduler, or a local
cluster whose workers use the flow's Prefect API (no temporary server per worker: measured +10 s and ~200 MB per
worker otherwise) and run without Dask's ``MALLOC_TRIM_THRESHOLD_`` (it triples the CPU time of the score pass).
"""

from __future__ import annotations

import logging
import os

__all__ = ["cluster_threads", "dask_task_runner"]


def cluster_threads(ctx) -> int:
    """Worker threads of the flow's Dask cluster (1 when the task runner is not Dask)."""
    from prefect_dask import DaskTaskRunner

    runner = getattr(ctx, "task_runner", None)
    if not isinstance(runner, DaskTaskRunner):
        return 1
    return max(1, sum(runner.client.nthreads().values()))  # starts the cluster (lazily created on first use)


def _local_cluster(**kwargs):
    """A ``distributed.LocalCluster`` whose workers use the flow's Prefect API (no server per worker)."""
    import dask
    import distributed
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    env = dict(kwargs.pop("env", None) or {})
    url = str(ctx.client.api_url) if ctx is not None and getattr(ctx, "client", None) is not None else None
    if url:
        env.setdefault("PREFECT_API_URL", url)
    threads = str(kwargs.get("threads_per_worker", 1))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(var, threads)
    for var in ("PREFECT_HOME", "DO_NOT_TRACK", "PREFECT_SERVER_ANALYTICS_ENABLED"):
        if var in os.environ:
            env.setdefault(var, os.environ[var])
    # Dask starts workers with MALLOC_TRIM_THRESHOLD_=65536, which also turns off glibc's dynamic mmap
    # threshold: every temporary above 128 kB is then mapped and unmapped per chunk. Measured on the
    # fAux chunks (d = 100, 16,384 rows): 3x the CPU time (86k vs 251k rows per CPU-second). Unset it.
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        return distributed.LocalCluster(env=env, **kwargs)


def dask_task_runner(*, workers: int | None = None, threads_per_worker: int = 1, scheduler_address: str | None = None):
    """The DaskTaskRunner for the settings: a running scheduler, or a new local cluster.

    Parameters
    ----------
    workers : int, optional
        Worker processes of the local cluster (default: one per CPU core).
    threads_per_worker : int
    scheduler_address : str, optional
        ``tcp://host:8786`` of a running Dask scheduler; ``workers`` is then ignored.
    """
    from prefect_dask import DaskTaskRunner

    from faux_checks.errors import InputError

    if scheduler_address:
        return DaskTaskRunner(address=scheduler_address)
    if workers is not None and workers < 1:
        raise InputError(f"workers must be >= 1 for a Dask cluster, got {workers}; score in one process with "
                         "faux_checks.gate.stream.run.score_stream (CLI: --workers 0)")
    return DaskTaskRunner(cluster_class=_local_cluster, cluster_kwargs={
        "n_workers": int(workers or os.cpu_count() or 1), "threads_per_worker": int(threads_per_worker),
        "processes": True, "dashboard_address": None, "silence_logs": logging.ERROR})
