"""The records of a check beside its report: per-row scores, per-group metrics and the auxiliary model.

:func:`write_check_records` writes them into a folder the gate logs with its MLflow run
(``records/``), so that a later audit can score new data with the *same* auxiliary model and
compare against the *same* score distribution (:func:`read_aux_record`), instead of retraining.

Files (names fixed, :data:`RECORD_FILES`):

- ``scores.parquet``: one row per input row (``row``, ``lic_score``, ``flagged``, ``status``;
  :func:`faux_checks.inputs.io.write_scores`): the scores' reference distribution;
- ``by_group.csv``: per protected group ``n``, ``flagged``, ``flagged_fraction``,
  ``flagged_fraction_defined``, ``undefined``, ``mean_score``, ``p90_score``;
- ``aux_model.pt``: the auxiliary model's network (raw outputs) as TorchScript, and
  ``aux_model.json``: what it needs to be read back (kind, output space, groups, feature count,
  the protected column, its quality when trained, the policy hash);
- ``aux_model_seed<k>.pt`` / ``aux_model_seed<k>.json``: each extra aux seed ``k`` (``decision.aux_seeds``),
  the same two files with the seed's own ``aux_key``, so that a re-gate or audit restores every seed, not only
  the first (:func:`faux_checks.gate.aux_cache.restore_recorded`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..errors import InputError
from ..provenance import jsonable

__all__ = ["RECORD_FILES", "read_aux_record", "record_check", "recording", "reference_scores", "seed_record_files",
           "write_check_records"]

logger = logging.getLogger(__name__)

#: The folder (and how to name a sub-folder per check) that :func:`record_check` writes to, inside :func:`recording`.
_ACTIVE: ContextVar[tuple[Path, Callable[[Any], str] | None] | None] = ContextVar("faux_checks_records", default=None)


@contextlib.contextmanager
def recording(folder: str | Path, *, subfolder: Callable[[Any], str] | None = None):
    """Within this block, every :func:`record_check` writes its check's records into ``folder``.

    The gate flow wraps its Great Expectations validation in it: the fAux expectation's metric
    computes the check once and records it here, so the records add no metric argument (the
    baseline expectations' dependency on that metric stays the same, and it is computed once).

    Parameters
    ----------
    folder : str or Path
    subfolder : callable, optional
        ``CheckResult -> str``: a sub-folder per check (several protected attributes).
    """
    token = _ACTIVE.set((Path(folder), subfolder))
    try:
        yield Path(folder)
    finally:
        _ACTIVE.reset(token)


def record_check(result) -> dict[str, str] | None:
    """Write ``result``'s records where :func:`recording` says; None (nothing written) outside it.

    A failure to write is logged, not raised: the records are evidence beside the decision, never part of it
    (the gate then records no URI for them, and an audit retrains its auxiliary model, saying why).
    """
    active = _ACTIVE.get()
    if active is None:
        return None
    folder, subfolder = active
    try:
        return write_check_records(result, folder / subfolder(result) if subfolder else folder)
    except Exception as exc:  # noqa: BLE001 - best effort beside the decision: logged
        logger.warning("the check's records could not be written to %s: %s", folder, exc)
        return None

RECORD_FILES = {"scores": "scores.parquet", "by_group": "by_group.csv", "aux_model": "aux_model.pt",
                "aux_model_info": "aux_model.json"}


def seed_record_files(seed: int) -> tuple[str, str]:
    """The file names of extra aux seed ``seed``'s record: ``(network .pt, info .json)``."""
    return f"aux_model_seed{int(seed)}.pt", f"aux_model_seed{int(seed)}.json"


def write_check_records(result, folder: str | Path) -> dict[str, str]:
    """Write a check's per-row scores, per-group metrics and auxiliary model into ``folder``.

    Parameters
    ----------
    result : CheckResult
        From :func:`faux_checks.gate.one_attribute.check_one_attribute` (its ``scores``, ``by_group``, ``aux_model``).
    folder : str or Path
        Created if absent; an existing record file is never overwritten.

    Returns
    -------
    dict
        Record name (keys of :data:`RECORD_FILES`) -> file path, for the files written (a check
        without scores or aux model writes fewer).

    Raises
    ------
    InputError
        If a record file exists already in ``folder``.
    OSError
        A write failed (no space left, ...) or did not read back whole; then none of this call's
        files is left (:mod:`faux_checks._files`: each is written whole, and those already
        written are removed), so a gate never points at part of a check's records.
    """
    from .._files import whole_file, write_whole
    from ..inputs.io import write_scores

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    seed_models = list(getattr(result, "aux_seed_models", None) or [])
    for name in [*RECORD_FILES.values(), *(f for k, _ in seed_models for f in seed_record_files(k))]:
        if (folder / name).exists():
            raise InputError(f"{folder / name} exists already; records are never overwritten")
    written: dict[str, str] = {}
    try:
        if result.scores is not None and result.row_index is not None:
            written["scores"] = str(write_scores(folder / RECORD_FILES["scores"], result))
        if result.by_group is not None:
            path = folder / RECORD_FILES["by_group"]
            written["by_group"] = str(write_whole(path, result.by_group.reset_index().to_csv(index=False)))
        aux = getattr(result, "aux_model", None)
        if aux is not None:
            import torch

            path = folder / RECORD_FILES["aux_model"]
            with whole_file(path) as tmp:
                torch.jit.save(aux.to_torchscript(), str(tmp))
            written["aux_model"] = str(path)
            info = _aux_model_info(aux, result)
            info_path = folder / RECORD_FILES["aux_model_info"]
            written["aux_model_info"] = str(write_whole(info_path, json.dumps(jsonable(info), indent=2)))
        for seed, model in seed_models:            # the extra seeds: restored by their own keys (gate/aux_cache.py)
            import torch

            pt, js = seed_record_files(seed)
            with whole_file(folder / pt) as tmp:
                torch.jit.save(model.to_torchscript(), str(tmp))
            written[f"aux_seed_{seed}"] = str(folder / pt)
            info = {**_model_fields(model), "seed": int(seed), "training": {"epochs_run": getattr(model, "epochs_run_", None)},
                    "aux_key": getattr(model, "cache_key_", None)}
            written[f"aux_seed_{seed}_info"] = str(write_whole(folder / js, json.dumps(jsonable(info), indent=2)))
    except BaseException:
        for done in written.values():
            Path(done).unlink(missing_ok=True)
        raise
    return written


def _model_fields(model) -> dict:
    """An auxiliary model's kind, output space, groups, input width and measured quality."""
    return {"kind": model.kind, "output_space": model.output_space, "groups": list(getattr(model, "groups_", ()) or ()),
            "n_features": getattr(model, "n_features_in_", None), "quality": getattr(model, "quality_", None)}


def _aux_model_info(aux, result) -> dict:
    """What the gate's next runs and the audit need to reuse the check's auxiliary model: how it was trained, on
    which policy and encoding, its cache key (gate/aux_cache.py) and the swap reference fitted with it."""
    provenance = result.provenance or {}
    info = {**_model_fields(aux), "quality_metric": getattr(aux, "quality_metric_", None),
            "protected": (provenance.get("policy") or {}).get("protected"),
            "feature_spec": provenance.get("feature_spec"), "policy_sha256": provenance.get("policy_sha256"),
            "aux_given": provenance.get("aux_given"), "training": provenance.get("aux_training"),
            "aux_key": provenance.get("aux_key")}      # the gate's next runs reuse it (gate/aux_cache.py)
    reference = getattr(result, "swap_reference", None)
    if reference is not None:                         # the audit reads both batches with it (its holds too)
        info["swap_reference"] = reference.to_dict()
        info["swap_settings"] = swap_settings_of((provenance.get("policy") or {}).get("faux") or {})
    return info


#: The ``[faux]`` settings a recorded swap reference was fitted under; the audit reuses it only under the same ones.
SWAP_SETTING_KEYS = ("variant", "admissible", "hold_uninformative", "hold_independent", "swap_metric",
                     "swap_categorical", "swap_coupling", "continuous_matching", "swap_guard")


def swap_settings_of(faux: dict) -> dict:
    """The ``[faux]`` settings (a policy's ``model_dump(mode="json")["faux"]``) that shape a swap reference."""
    return {k: (list(faux[k]) if isinstance(faux.get(k), (list, tuple)) else faux.get(k)) for k in SWAP_SETTING_KEYS}


def read_aux_record(folder: str | Path, *, policy) -> tuple[Any, dict]:
    """The auxiliary model a gate recorded, checked against the policy the audit uses.

    Parameters
    ----------
    folder : str or Path
        Holds ``aux_model.pt`` and ``aux_model.json`` (:func:`write_check_records`).
    policy : Policy
        The audit's policy: its protected column and ``aux.output_space`` must match the record.

    Returns
    -------
    (model, info)
        The auxiliary model (its TorchScript network loaded with ``torch.jit.load``, never unpickled; an
        :class:`~faux_checks.AuxiliaryModel`) and the JSON record. When the gate recorded its swap reference
        and the audit's policy has the same ``[faux]`` settings, the model carries it as ``swap_reference_``,
        so that both batches are read with the gate's counterfactual (its holds, matched values, level models),
        not one refitted on each batch: a change of the scores then measures the data.

    Raises
    ------
    InputError
        A file is missing, or the record was made for another protected column or output space
        (the message says which; retrain instead).
    """
    from ..inputs.models import load_model

    folder = Path(folder)
    model_path, info_path = folder / RECORD_FILES["aux_model"], folder / RECORD_FILES["aux_model_info"]
    if not model_path.is_file() or not info_path.is_file():
        raise InputError(f"no recorded auxiliary model in {folder} (need {model_path.name} and {info_path.name})")
    info = json.loads(info_path.read_text())
    if info.get("protected") not in (None, policy.protected):
        raise InputError(f"the recorded auxiliary model predicts '{info['protected']}', the audit's policy protects "
                         f"'{policy.protected}'")
    if info.get("output_space") != policy.aux.output_space:
        raise InputError(f"the recorded auxiliary model has output space '{info.get('output_space')}', the audit's "
                         f"policy '{policy.aux.output_space}'")
    from ..method.auxiliary import AuxiliaryModel
    from ..method.swap import SwapReference

    aux = AuxiliaryModel.from_module(load_model(model_path), kind=info.get("kind") or "binary",
                                     output_space=info.get("output_space") or policy.aux.output_space,
                                     groups=tuple(info.get("groups") or ()), n_features=info.get("n_features"))
    recorded = info.get("swap_reference")
    same = info.get("swap_settings") == swap_settings_of(policy.faux.model_dump(mode="json"))
    if recorded is not None and same:
        aux.swap_reference_ = SwapReference.from_dict(recorded)
    info["swap_reference_reused"] = recorded is not None and same
    return aux, info


def reference_scores(path: str | Path) -> np.ndarray:
    """The defined LIC scores (m,) of a recorded ``scores.parquet`` (rows with status ``scored``).

    Raises
    ------
    InputError
        The file lacks the ``lic_score`` / ``status`` columns.
    """
    frame = pd.read_parquet(path)
    missing = [c for c in ("lic_score", "status") if c not in frame.columns]
    if missing:
        raise InputError(f"{path} is not a scores record: columns {missing} missing")
    scores = frame.loc[frame["status"] == "scored", "lic_score"].to_numpy(dtype=np.float64)
    return scores[np.isfinite(scores)]
