"""Thread control (private): torch, numpy's BLAS and OpenMP on one thread for the small fits and the reference fit."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

__all__ = ["one_blas_thread", "one_thread", "one_torch_thread"]


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch on one intra-op thread, restoring the previous count afterwards.

    Batches of ~512 rows × 64 units gain nothing from more threads. Measured on the shared
    2-core machines: the demo's target training was 9× slower with two threads (28 s vs 3 s for
    5 epochs) and the gate's auxiliary-model fit on Adult took 4-28 CPU s with two threads
    against 0.5-0.8 CPU s with one (benchmarks/bench_gate.py). One thread also makes the trained
    weights independent of the machine's core count (reproducible decisions).
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run numpy's BLAS (OpenBLAS) on one thread inside a torch loop.

    The swap reading mixes small numpy products (the per-group linear models of the aux output) into
    each chunk of torch work; OpenBLAS threads spin after every call and take the cores torch needs.
    Measured (bench_scoring, n = 100,000, d = 100, 2 torch threads): 0.49 s per evaluation with BLAS
    threaded, 0.23 s with one BLAS thread.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch, numpy's BLAS and OpenMP (scikit-learn's gradient boosting) on one thread each.

    For the swap reading's reference fit (:meth:`~faux_checks.method.faux.FAuxTester.fit_reference`): a fixed
    cost per check that mixes torch forwards, numpy solves and scikit-learn fits, each of which would otherwise
    start its own pool on every core; the parallelism of a large check is its workers (one thread each).
    """
    from threadpoolctl import threadpool_limits

    with one_torch_thread(), threadpool_limits(limits=1):
        yield
