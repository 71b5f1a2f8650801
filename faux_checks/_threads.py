"""Torch thread control for the small training loops (private)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

__all__ = ["one_torch_thread"]


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
