"""Each auxiliary model trained once per process: the same training inputs give back the model already trained.

A gate run over several versions trains the auxiliary model (and its extra seeds) on the same audit rows again
for every version whose encoded inputs are the same (the Adult demo: v1-v4 share their audit rows, v1/v2 and v3/v4
their encodings). Training is deterministic given its inputs (tested: identical weights twice), so a model keyed
by the sha256 of everything its training reads — the encoded rows and protected values, the groups, the kind,
the ``[aux]`` settings and the seed — is the model a new training would give.

Across processes: a gate records its auxiliary model in its run's records (``aux_model.pt`` + ``aux_model.json``,
which carries this key) and tags the run ``fairness_aux_key``; its extra seeds likewise (``aux_model_seed<k>.*``,
tag ``fairness_aux_seed_keys`` = ``"<k>:<key> ..."``), so a re-gate restores every seed, not only the first. Inside :func:`aux_store` (the gate flow opens one on
its registry), a key this process has not trained is looked up there first; the recorded weights are restored
(:meth:`AuxiliaryModel.restore`: the same model, scores bit for bit) and the check's provenance says
``aux_reused_from`` ("run <id>"). A lookup that fails for any reason trains instead (logged).

A copy is handed out (callers may set attributes, e.g. the swap reference) and the stored model is never touched.
At most :data:`MAX_ENTRIES` models are kept (least recently used dropped).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from contextvars import ContextVar
from pathlib import Path
from typing import Callable

import numpy as np

from .._device import resolve_device
from ..kinds import Kind
from ..method.auxiliary import AuxiliaryModel
from .policy_schema import Policy

__all__ = ["MAX_ENTRIES", "aux_cache_stats", "aux_store", "clear_aux_cache", "fitted_reference", "new_aux",
           "restore_recorded", "trained_aux"]

logger = logging.getLogger(__name__)

#: Trained auxiliary models kept per process.
MAX_ENTRIES = 8

_CACHE: OrderedDict[str, AuxiliaryModel] = OrderedDict()
_LOCK = threading.Lock()
_STATS = {"hits": 0, "trainings": 0, "restored": 0, "reference_fits": 0, "reference_hits": 0}
#: Fitted swap references kept per process (:func:`fitted_reference`).
MAX_REFERENCES = 16
_REFERENCES: OrderedDict[str, dict] = OrderedDict()
#: ``key -> (records folder, source) or None``: where recorded models are looked up (:func:`aux_store`).
_STORE: ContextVar[Callable[[str], tuple[Path, str] | None] | None] = ContextVar("faux_checks_aux_store", default=None)


@contextlib.contextmanager
def aux_store(lookup: Callable[[str], tuple[Path, str] | None]):
    """Within this block, a model not trained in this process is first looked up with ``lookup(key)``.

    ``lookup`` returns the folder holding a recorded ``aux_model.pt`` + ``aux_model.json`` for that key and a
    source for the report (e.g. ``"run 0a1b..."``), or None; it may raise (then the model is trained).
    """
    token = _STORE.set(lookup)
    try:
        yield
    finally:
        _STORE.reset(token)


def restore_recorded(policy: Policy, kind: Kind, X: np.ndarray, values: np.ndarray, folder: str | Path, *, key: str,
                     groups=None, seed: int | None = None) -> AuxiliaryModel:
    """The recorded model of ``folder`` (:func:`faux_checks.report.records.write_check_records`), restored on (X, values).

    An extra aux seed's record (``aux_model_seed<seed>.pt/.json``) is read when ``folder`` has one for ``seed``,
    else the check's own (``aux_model.pt/.json``); either way its ``aux_key`` must be ``key``.

    Raises
    ------
    InputError
        The record is not for ``key`` (other data, settings or seed), or its weights do not fit the settings.
    """
    from ..errors import InputError
    from ..inputs.models import load_model

    folder = Path(folder)
    pt, js = "aux_model.pt", "aux_model.json"
    if seed is not None and (folder / f"aux_model_seed{int(seed)}.json").is_file():   # an extra seed's record
        pt, js = f"aux_model_seed{int(seed)}.pt", f"aux_model_seed{int(seed)}.json"
    info = json.loads((folder / js).read_text())
    if info.get("aux_key") != key:
        raise InputError(f"the record in {folder} is for auxiliary-model key {info.get('aux_key')!r}, not {key!r}")
    module = load_model(folder / pt)                      # TorchScript, never unpickled
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    epochs_run = (info.get("training") or {}).get("epochs_run")
    return new_aux(policy, kind, seed=seed).restore(X, values, state, groups=groups or (), epochs_run=epochs_run)


def new_aux(policy: Policy, kind: Kind, *, seed: int | None = None, progress: bool = False) -> AuxiliaryModel:
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


def trained_aux(policy: Policy, kind: Kind, X: np.ndarray, values: np.ndarray, *, groups=None, seed: int | None = None,
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
    aux = _from_store(policy, kind, X, values, key=key, groups=groups, seed=seed)
    reused = aux is not None
    if aux is None:
        aux = new_aux(policy, kind, seed=seed, progress=progress).fit(X, values, groups=groups)
    aux.cache_key_ = key
    with _LOCK:
        _CACHE[key] = copy.deepcopy(aux)
        _STATS["restored" if reused else "trainings"] += 1
        while len(_CACHE) > MAX_ENTRIES:
            _CACHE.popitem(last=False)
    return aux, reused


def _from_store(policy: Policy, kind: Kind, X, values, *, key: str, groups, seed: int) -> AuxiliaryModel | None:
    """The recorded model for ``key`` from the open :func:`aux_store`, or None (none open, none found, or unusable)."""
    lookup = _STORE.get()
    if lookup is None:
        return None
    try:
        found = lookup(key)
        if found is None:
            return None
        folder, source = found
        aux = restore_recorded(policy, kind, X, values, folder, key=key, groups=groups, seed=seed)
    except Exception as exc:          # noqa: BLE001 - evidence beside the decision: a record that does not read back is retrained
        logger.warning("the recorded auxiliary model for key %s could not be reused (%s: %s); training it",
                       key[:12], type(exc).__name__, exc)
        return None
    aux.reused_from_ = source
    return aux


def clear_aux_cache() -> None:
    """Forget every stored model (tests that patch the training; a process that wants the memory back)."""
    with _LOCK:
        _CACHE.clear()
        _REFERENCES.clear()
        _STATS.update(hits=0, trainings=0, restored=0, reference_fits=0, reference_hits=0)


def aux_cache_stats() -> dict[str, int]:
    """``hits`` (trainings saved in this process), ``restored`` (recorded models reused), ``trainings`` (models
    trained), ``reference_fits`` / ``reference_hits`` (swap references fitted / reused, :func:`fitted_reference`)
    since the last clear, and ``entries`` (aux models kept)."""
    with _LOCK:
        return {**_STATS, "entries": len(_CACHE)}


def _digest(h, value) -> None:
    """Feed ``value`` (arrays by dtype, shape and bytes; sequences and mappings element by element) into ``h``."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        h.update(f"a{array.dtype.str}{array.shape}".encode())
        h.update(array.tobytes())
    elif isinstance(value, (list, tuple)):
        h.update(f"s{len(value)}(".encode())
        for v in value:
            _digest(h, v)
        h.update(b")")
    elif isinstance(value, dict):
        h.update(f"m{len(value)}(".encode())
        for k in sorted(value, key=str):
            h.update(repr(k).encode())
            _digest(h, value[k])
        h.update(b")")
    else:
        h.update(f"v{value!r};".encode())


def _reference_key(tester, X_ref, c_ref, settings: dict) -> str:
    """sha256 of everything :meth:`FAuxTester.fit_reference` reads: the aux network (its weights and buffers, so
    an aux model changed after training is another key) and kind, the reference rows and values, the swap
    settings' categorical mode and groups, and the arguments."""
    aux = tester.aux_model
    h = hashlib.sha256()
    for name, tensor in aux.net_.state_dict().items():
        h.update(name.encode())
        _digest(h, tensor.detach().cpu().numpy())
    h.update(f"kind:{aux.kind}".encode())
    _digest(h, [np.asarray(X_ref), np.asarray(c_ref), tester.swap.categorical,
                [np.asarray(g) for g in tester.swap.categorical_groups], settings])
    return h.hexdigest()


def fitted_reference(tester, X_ref, c_ref, **settings):
    """``tester`` with its swap reference: :meth:`~faux_checks.method.faux.FAuxTester.fit_reference` ``(X_ref, c_ref,
    **settings)``, or the reference this process fitted on the same inputs (the demo fitted 15
    references where its 3 seeds x 2 encodings make 6 distinct).

    The fit is deterministic given what :func:`_reference_key` hashes (the aux model, rows, values, categorical groups
    and settings; its permutation tests are seeded), so the stored reference is the one a new fit would give. Sets
    ``reference``, ``held_fixed_``, ``informativeness_``, ``independence_``, ``joint_hold_``, ``reference_sample_``
    (copies of the stored ones) and ``reference_reused_`` (True on a hit).

    Raises
    ------
    Whatever :meth:`FAuxTester.fit_reference` raises (nothing is stored then).
    """
    key = _reference_key(tester, X_ref, c_ref, settings)
    with _LOCK:
        hit = _REFERENCES.get(key)
        if hit is not None:
            _REFERENCES.move_to_end(key)
            _STATS["reference_hits"] += 1
    if hit is None:
        tester.fit_reference(X_ref, c_ref, **settings)
        fitted = {"reference": tester.reference, "held_fixed_": tester.held_fixed_.copy(),
                  "informativeness_": copy.deepcopy(tester.informativeness_),
                  "independence_": copy.deepcopy(tester.independence_),
                  "joint_hold_": copy.deepcopy(getattr(tester, "joint_hold_", None)),
                  "reference_sample_": dict(tester.reference_sample_)}
        with _LOCK:
            _REFERENCES[key] = fitted
            _STATS["reference_fits"] += 1
            while len(_REFERENCES) > MAX_REFERENCES:
                _REFERENCES.popitem(last=False)
        tester.reference_reused_ = False
        return tester
    tester.reference = hit["reference"]
    tester.held_fixed_ = hit["held_fixed_"].copy()
    tester.informativeness_ = copy.deepcopy(hit["informativeness_"])
    tester.independence_ = copy.deepcopy(hit["independence_"])
    tester.joint_hold_ = copy.deepcopy(hit["joint_hold_"])
    tester.reference_sample_ = dict(hit["reference_sample_"])
    tester.reference_reused_ = True
    return tester
