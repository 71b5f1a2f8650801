"""Each auxiliary model trained once per process: the same training inputs give back the model already trained.

A gate run over several versions trains the auxiliary model (and its extra seeds) on the same audit rows again
for every version whose encoded inputs are the same (the Adult demo: v1-v4 share their audit rows, v1/v2 and v3/v4
their encodings). Training is deterministic given its inputs (tested: identical weights twice), so a model keyed
by the sha256 of everything its training reads — the encoded rows and protected values, the groups, the kind,
the ``[aux]`` settings and the seed — is the model a new training would give. Issue 23, item 1 (within a process;
not yet across processes through the run's records).

A copy is handed out (callers may set attributes, e.g. the swap reference) and the stored model is never touched.
At most :data:`MAX_ENTRIES` models are kept (least recently used dropped).
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict

import numpy as np

from .._device import resolve_device
from ..method.auxiliary import AuxiliaryModel
from .policy import Policy

__all__ = ["MAX_ENTRIES", "aux_cache_stats", "clear_aux_cache", "new_aux", "trained_aux"]

#: Trained auxiliary models kept per process.
MAX_ENTRIES = 8

_CACHE: OrderedDict[str, AuxiliaryModel] = OrderedDict()
_LOCK = threading.Lock()
_STATS = {"hits": 0, "trainings": 0}


def new_aux(policy: Policy, kind: str, *, seed: int | None = None, progress: bool = False) -> AuxiliaryModel:
    """An untrained auxiliary model with the policy's ``[aux]`` settings, seeded with ``seed`` (default ``policy.seed``),
    training on the ``[scale] device`` (``--device``; :func:`faux_checks._device.resolve_device`)."""
    settings = policy.aux
    return AuxiliaryModel(kind=kind, hidden=settings.hidden, epochs=settings.epochs, holdout=settings.holdout,
                          output_space=settings.output_space, seed=policy.seed if seed is None else seed,
                          progress=progress, device=str(resolve_device(policy.scale.device)))


def _key(policy: Policy, kind: str, seed: int, X: np.ndarray, values: np.ndarray, groups) -> str:
    h = hashlib.sha256()
    for array in (np.ascontiguousarray(X), np.ascontiguousarray(values)):
        h.update(f"{array.dtype.str}{array.shape}".encode())
        h.update(array.tobytes())
    settings = {"aux": policy.aux.model_dump(mode="json"), "kind": kind, "seed": int(seed),
                "groups": [str(g) for g in groups] if groups is not None else None}
    device = resolve_device(policy.scale.device).type
    if device != "cpu":       # a CUDA-trained model differs by rounding: its own key (the CPU key is unchanged)
        settings["device"] = device
    h.update(json.dumps(settings, sort_keys=True).encode())
    return h.hexdigest()


def trained_aux(policy: Policy, kind: str, X: np.ndarray, values: np.ndarray, *, groups=None, seed: int | None = None,
                progress: bool = False) -> tuple[AuxiliaryModel, bool]:
    """``(fitted auxiliary model, reused)``: trained on ``(X, values)`` with the policy's ``[aux]`` settings and
    ``seed`` (default ``policy.seed``), or a copy of the model this process trained on the same inputs.

    Parameters
    ----------
    X : ndarray of shape (n, d_aux)
        Encoded training rows (the protected attribute's own columns left out).
    values : ndarray of shape (n,)
        Encoded protected values.
    groups : sequence, optional
        The protected attribute's group names (binary / multi-class).

    Raises
    ------
    Whatever :meth:`AuxiliaryModel.fit` raises (nothing is stored then).
    """
    seed = policy.seed if seed is None else seed
    key = _key(policy, kind, seed, X, values, groups)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            _STATS["hits"] += 1
            return copy.deepcopy(hit), True
    aux = new_aux(policy, kind, seed=seed, progress=progress).fit(X, values, groups=groups)
    with _LOCK:
        _CACHE[key] = copy.deepcopy(aux)
        _STATS["trainings"] += 1
        while len(_CACHE) > MAX_ENTRIES:
            _CACHE.popitem(last=False)
    return aux, False


def clear_aux_cache() -> None:
    """Forget every stored model (tests that patch the training; a process that wants the memory back)."""
    with _LOCK:
        _CACHE.clear()
        _STATS.update(hits=0, trainings=0)


def aux_cache_stats() -> dict[str, int]:
    """``hits`` (trainings saved) and ``trainings`` (models trained) since the last clear, and ``entries``."""
    with _LOCK:
        return {**_STATS, "entries": len(_CACHE)}
