"""Thread control (private): torch, numpy's BLAS and OpenMP on one thread for the small fits and the reference fit,
and the reference fit's independent tests and gradient-boosting fits spread over the threads torch had outside it."""

from __future__ import annotations

import contextlib
import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

import torch

__all__ = ["one_blas_thread", "one_thread", "one_torch_thread", "thread_map"]

T = TypeVar("T")
R = TypeVar("R")

#: Torch's intra-op threads outside the innermost :func:`one_thread` (1 outside any): the threads :func:`thread_map`
#: may use.
_OUTER_THREADS: contextvars.ContextVar[int] = contextvars.ContextVar("faux_checks_outer_threads", default=1)


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
    start its own pool on every core; the parallelism of a large check is its workers (one thread each). Inside it,
    :func:`thread_map` spreads independent tests and fits over the threads torch had outside it.
    """
    from threadpoolctl import threadpool_limits

    token = _OUTER_THREADS.set(torch.get_num_threads())
    try:
        with one_torch_thread(), threadpool_limits(limits=1):
            yield
    finally:
        _OUTER_THREADS.reset(token)


def thread_map(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``, inside :func:`one_thread` on as many Python threads as torch had outside it.

    For independent single-threaded work whose results do not depend on the thread that computes them (the
    reference fit's hold tests, scikit-learn's seeded gradient-boosting fits): the same results in the same order on
    any number of threads.
    Each call on a pool thread runs on one OpenMP thread (its own setting: a Python thread starts with OpenMP's
    default count); serially (outside :func:`one_thread`, with one torch thread outside it, or one item) the calls
    run on the caller's thread and settings. The reference fit then uses the cores scoring uses (torch's threads), and
    a one-thread scoring worker runs it serially.

    Parameters
    ----------
    fn : callable
        Called once per item, with the item.
    items : iterable
        The arguments, read once.

    Returns
    -------
    list
        fn's results, in the items' order.

    Raises
    ------
    Exception
        What fn raised for the first item (in the items' order) whose call raised; on the pool every item's call
        has run by then.
    """
    todo = list(items)
    workers = min(len(todo), _OUTER_THREADS.get())
    if workers <= 1:
        return [fn(x) for x in todo]
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()

    def run(x: T) -> R:
        with controller.limit(limits=1, user_api="openmp"):
            return fn(x)

    with ThreadPoolExecutor(workers, thread_name_prefix="faux-checks-fit") as pool:
        return list(pool.map(run, todo))
