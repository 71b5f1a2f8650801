"""Memory handed back between versions of one gate call (RSS grew ~5-10 MB per version).

Our reading of what grew (measured with ``benchmarks/bench_load.py``, 12 tiny TorchScript versions, and
tracemalloc / an object census between versions): not live Python objects (tracemalloc's diff between
versions 3 and 7 was under 0.01 MiB per version, the object count flat) and not allocator fragmentation
(``malloc_trim`` gave back under 2 MiB), but **cyclic garbage** holding native memory (torch tensors of the
auxiliary model's training, matplotlib's Agg buffers, GX and Prefect objects): with ~1 million live
objects, CPython's oldest generation is collected only when it has grown by a quarter, so a gate over
many versions kept every version's garbage. One full :func:`gc.collect` after each version made the RSS
flat (803.2, 803.3, 803.4, 803.8 MiB after versions 3-6). The GX metric's model cache
(``faux_checks_gx._inputs.cached_model``, up to 16 loaded models and auxiliary models) kept the models of
earlier versions too; it is emptied after each version (it serves the expectations of one version).

A full collection walks every tracked object: ~870,000 once torch, MLflow, Prefect and Great Expectations are
imported, 0.3-1.7 s each (2-core machine, quiet to loaded). :func:`versions_frozen` keeps what was alive before a
version out of the collections that follow it (:func:`gc.freeze`), so each version's collection (and any
automatic one during the next version) walks only what that version made; everything is handed back to the
collector (:func:`gc.unfreeze`) when the loop over versions ends, so a cycle that died meanwhile is collected
then.
"""

from __future__ import annotations

import contextlib
import gc
import time
from typing import Iterator

__all__ = ["free_version_memory", "versions_frozen"]


@contextlib.contextmanager
def versions_frozen() -> Iterator[None]:
    """Within the block, the objects alive now are left out of garbage collection (:func:`gc.freeze`), and
    :func:`free_version_memory` leaves out the survivors of its own collection; :func:`gc.unfreeze` at the end.

    An object frozen alive that becomes cyclic garbage within the block is freed by the first collection after it.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def free_version_memory() -> float:
    """Empty the per-version model cache and collect cyclic garbage; the seconds it took.

    Called by the gate flow after each version (``flows/gate.py``); safe anywhere (nothing a later
    version needs is dropped: a model is loaded again from its file when asked for).
    """
    t0 = time.perf_counter()
    try:
        from faux_checks_gx._inputs import clear_model_cache
    except ImportError:  # pragma: no cover - the GX expectations are not installed
        pass
    else:
        clear_model_cache()
    gc.collect()
    if gc.get_freeze_count():   # inside versions_frozen: the survivors are not walked again by the next version's
        gc.freeze()
    return time.perf_counter() - t0
