"""Chunks, eval mode and tensors: what every function of :mod:`faux_checks.method` shares.

Every model call here runs in eval mode and restores each submodule's previous mode after it;
X is taken in chunks of ``chunk_size`` rows, so memory is bounded by the chunk, not by n.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
import torch

from ..errors import InputError

__all__ = ["DEFAULT_CHUNK", "as_tensor", "eval_mode", "iter_chunks"]

DEFAULT_CHUNK = 16_384  # rows; 65,536 spent ~half its CPU in page faults (bench_scale/bench_scoring: 2.37x -> 2.05x the floor)


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run ``model`` in eval mode and restore every submodule's previous mode afterwards.

    A ``torch.export`` module refuses ``eval()`` (its graph was fixed at export time); it is
    used as it is, and :func:`~faux_checks.method.gradients.check_batch_independence` catches train-mode layers.
    """
    modules = list(model.modules()) if hasattr(model, "modules") else []
    previous = [m.training for m in modules]
    try:
        if hasattr(model, "eval"):
            try:
                model.eval()
            except NotImplementedError:  # torch.export's GraphModule: "Calling eval() is not supported"
                pass
        yield model
    finally:
        for m, was_training in zip(modules, previous, strict=True):
            m.training = was_training


def iter_chunks(n: int, chunk_size: int) -> Iterator[slice]:
    """Slices of at most ``chunk_size`` rows covering range(n)."""
    if chunk_size < 1:
        raise InputError(f"chunk_size must be >= 1, got {chunk_size}")
    for start in range(0, n, chunk_size):
        yield slice(start, min(start + chunk_size, n))


def as_tensor(X) -> torch.Tensor:
    """A float32 tensor view of X (ndarray or tensor) of shape (n, d)."""
    if isinstance(X, torch.Tensor):
        t = X.detach()
    else:
        t = torch.from_numpy(np.ascontiguousarray(X))
    if t.ndim != 2:
        raise InputError(f"X must have shape (n, d), got {tuple(t.shape)}")
    return t.float()
