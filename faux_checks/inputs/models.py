"""Loading and saving target/auxiliary models without unpickling arbitrary objects.

Accepted formats, detected from the file's content (not its name):

- **TorchScript** (``torch.jit.save``): a zip archive with ``code/`` and ``constants.pkl``;
  loaded with ``torch.jit.load``, whose unpickler only rebuilds tensors and TorchScript types.
- **torch.export** (``torch.export.save``, ``.pt2``): checked and loaded by
  :mod:`faux_checks.inputs.export_archive` (``torch.export.load`` alone unpickles and ``exec``-s content
  of the archive; that module lists how and what it refuses).
- **state dict + factory**: a ``torch.save`` of a dict of tensors, loaded with
  ``weights_only=True`` into a module built by a factory the caller gives.
- **forward-only targets** (:mod:`faux_checks.inputs.targets`, optional extra ``blackbox``): ONNX,
  XGBoost JSON/UBJ, LightGBM text, scikit-learn through skops (trusted types only). They load as a
  :class:`~faux_checks.method.forward.ForwardOnlyTarget`, queried for predictions only.

Anything else, in particular a pickled ``nn.Module`` (``torch.save(model)``), is refused with
:class:`~faux_checks.errors.UnsafeModelError` before any of its code can run (bad-inputs C10).
``allow_pickle=True`` is the explicit, documented opt-in for trusted files.

Size: a zip archive (TorchScript, torch.export) whose members unpack to more than ``max_bytes``
(1 GiB by default) is refused before it is read: a 2 MB zip bomb named ``model.pt`` can unpack to
2.6 GB.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import zipfile
from pathlib import Path
from typing import Callable, Sequence

import torch

from ..errors import InputError, UnsafeModelError
from ..provenance import file_sha256
from ..method._batching import eval_mode
from .formats import load_forward_only, sniff_format

__all__ = ["DEFAULT_MAX_MODEL_BYTES", "load_model", "model_format", "save_torchscript", "model_sha256"]

DEFAULT_MAX_MODEL_BYTES = 1 << 30

EXPORT_HINT = (
    "Export the model safely instead: torch.jit.save(torch.jit.script(model), 'model.pt') "
    "(or torch.jit.trace), or torch.export.save(torch.export.export(model, (example,)), 'model.pt2'), "
    "or save model.state_dict() and pass a factory. Only if you trust the file's author, "
    "load it with allow_pickle=True (CLI: --allow-pickle)."
)


def _zip_names(path: Path, max_bytes: int | None = None) -> list[str]:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except zipfile.BadZipFile:
        return []
    if max_bytes is not None:
        unpacked = sum(i.file_size for i in infos)
        if unpacked > max_bytes:
            raise InputError(
                f"refused to load {path}: its {len(infos)} archive members unpack to {unpacked:,} bytes, more than "
                f"the limit of {max_bytes:,} bytes (max_bytes) for a model file; a tabular model is far smaller, so "
                "this is a damaged or hostile file. Nothing from it was read."
            )
    return [i.filename for i in infos]


def _read_once(path: Path, limits) -> bytes:
    """A zip model file's bytes, read once: the size and archive limits are checked on them, and every later
    check and the load use them (a file swapped on disk meanwhile is never read again)."""
    from .limits import check_archive

    with open(path, "rb") as fh:
        data = fh.read(limits.max_model_bytes + 1)
    if len(data) > limits.max_model_bytes:
        raise InputError(f"refused to load {path}: it has more than the limit of {limits.max_model_bytes:,} bytes "
                         "(max_bytes) for a model file. Nothing from it was loaded.")
    check_archive(data, limits, name=str(path))
    return data


def model_format(path: str | Path) -> str:
    """The format of a model file, read from its content (nothing is loaded or unpickled).

    Returns
    -------
    str
        ``"torchscript"`` (``torch.jit.save``), ``"torch.export"`` (``torch.export.save``, ``.pt2``),
        ``"torch.save"`` (a pickle: a state dict loads with ``weights_only``, a pickled module
        would run code), a forward-only format (``"onnx"``, ``"xgboost"``, ``"lightgbm"``, ``"skops"``): the
        name of the entry of :data:`faux_checks.inputs.formats.FORMATS` that detects it, or ``"unknown"``.
        All but ``"torch.save"`` load without unpickling (:func:`load_model`).

    Raises
    ------
    InputError
        If ``path`` is not a file.
    """
    from .formats import detect_format

    path = Path(path)
    if not path.is_file():
        raise InputError(f"model file {path} does not exist")
    fmt = detect_format(path)              # the format table (faux_checks.inputs.formats.FORMATS)
    return "unknown" if fmt is None else fmt.name


def _is_torchscript(names: list[str]) -> bool:
    return any(n.endswith("constants.pkl") for n in names) and any("/code/" in n for n in names)


def _is_export(names: list[str]) -> bool:
    return any(n.endswith("serialized_exported_program.json") or "/models/" in n for n in names)


def load_model(
    path: str | Path,
    *,
    factory: Callable[[], torch.nn.Module] | None = None,
    allow_pickle: bool = False,
    trusted_types: Sequence[str] = (),
    max_bytes: int | None = None,
):
    """Load a target or auxiliary model from ``path`` safely.

    Parameters
    ----------
    path : str or Path
        TorchScript archive, torch.export archive, or a state dict (with ``factory``).
    factory : callable, optional
        Builds the module a state dict is loaded into.
    allow_pickle : bool
        Opt-in for a file whose author you trust: ``torch.load(weights_only=False)`` for a pickled
        module, plain ``torch.export.load`` for an archive :mod:`~faux_checks.inputs.export_archive` refuses.
    trusted_types : sequence of str
        skops files: types to rebuild beyond those skops trusts by default (:func:`~faux_checks.inputs.targets.load_skops`).
    max_bytes : int, optional
        Largest file, and largest unpacked size of a zip archive (TorchScript, torch.export, skops), in bytes;
        default the ``[operations] max_model_bytes`` in force (:func:`~faux_checks.inputs.limits.set_model_limits`).
        The other limits of :mod:`faux_checks.inputs.limits` apply too: compression ratio, trees, leaves,
        depth, and the probe process that loads LightGBM / XGBoost / ONNX / skops files first.

    Returns
    -------
    torch.nn.Module or torch.jit.ScriptModule
        In eval mode (a torch.export module as it was exported: it refuses ``eval()``); for ONNX,
        XGBoost, LightGBM and skops files a :class:`~faux_checks.method.forward.ForwardOnlyTarget`.

    Raises
    ------
    InputError
        The file does not exist or is not a model, or a state dict does not fit the module
        the factory builds, or a zip archive unpacks to more than ``max_bytes``, or the file is past a
        limit of :mod:`faux_checks.inputs.limits` or refused by the probe (:mod:`faux_checks.inputs.probe`: its loader
        aborted in the probe process included; TorchScript and torch.export files are probed where ``probe_torch``
        is in force: the gate's run).
    UnsafeModelError
        The file is a pickle that needs arbitrary code to load, or a torch.export archive that
        holds code (:func:`~faux_checks.inputs.export_archive.check_export_archive`), and
        ``allow_pickle`` is False; nothing from it has been executed.
    """
    from .limits import check_tree_model

    path = Path(path)
    limits = _checked_file(path, max_bytes)
    fmt = sniff_format(path)
    if fmt is not None:
        check_tree_model(path, fmt, limits)
        return _probed(path, fmt, limits, lambda: load_forward_only(path, fmt, trusted_types=trusted_types),
                       trusted_types)
    names = _zip_names(path, limits.max_model_bytes)
    if _is_torchscript(names):
        data = _read_once(path, limits)
        # probed in the gate's run only (limits.probe_torch): a crash isolated, the probe loads these same bytes
        model = _probed(path, "torchscript", limits, lambda: _load_torchscript(path, data),
                        sha256=hashlib.sha256(data).hexdigest())
        model.eval()
        return model
    if _is_export(names):
        return _load_export(path, limits, allow_pickle=allow_pickle)
    return _load_torch_file(path, factory=factory, allow_pickle=allow_pickle)


def _checked_file(path: Path, max_bytes: int | None):
    """The model limits in force (``max_bytes`` overriding ``max_model_bytes``), once ``path`` is a file within them.

    Raises :class:`InputError` for a missing file, one over ``max_bytes``, or a zip archive past the limits (read
    from its directory, before anything unpacks it).
    """
    from .limits import check_archive, model_limits

    if not path.is_file():
        raise InputError(f"model file {path} does not exist")
    limits = model_limits()
    if max_bytes is None:
        max_bytes = limits.max_model_bytes
    elif max_bytes != limits.max_model_bytes:
        from dataclasses import replace

        limits = replace(limits, max_model_bytes=max_bytes)
    size = path.stat().st_size
    if size > max_bytes:
        raise InputError(
            f"refused to load {path}: it has {size:,} bytes, more than the limit of {max_bytes:,} bytes "
            "(max_bytes) for a model file. Nothing from it was read."
        )
    check_archive(path, limits)            # a zip bomb is refused from its directory, before anything unpacks it
    return limits


def _load_export(path: Path, limits, *, allow_pickle: bool):
    """A torch.export archive: checked for code and loaded from the bytes read once (probed in the gate's run), or
    with ``allow_pickle`` torch's own loader."""
    if allow_pickle:  # the explicit opt-in: torch's own loader, pickles and all
        try:
            return torch.export.load(str(path)).module()
        except Exception as exc:
            raise InputError(f"cannot load torch.export model {path}: {exc}") from exc
    from .export_archive import check_export_archive, load_export_archive

    data = _read_once(path, limits)        # checked, probed and loaded: these bytes, never the path again
    if limits.probe_torch:                 # the gate's run: checked here, then loaded once in the probe child
        check_export_archive(data, str(path))
    return _probed(path, "torch.export", limits, lambda: load_export_archive(data, str(path)),
                   sha256=hashlib.sha256(data).hexdigest())


def _load_torch_file(path: Path, *, factory: Callable[[], torch.nn.Module] | None, allow_pickle: bool):
    """A ``torch.save`` file: a pickled module with ``allow_pickle``, else tensors only (``weights_only``), a state
    dict loaded into ``factory()``; a pickle that needs other objects is refused unexecuted."""
    if allow_pickle:
        model = torch.load(str(path), map_location="cpu", weights_only=False)  # noqa: S614 - explicit opt-in
        if hasattr(model, "eval"):
            model.eval()
        return model
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - sorted below: refused pickle or not a model file
        if not (isinstance(exc, pickle.UnpicklingError) and "Weights only load failed" in str(exc)):
            # not a pickle the restricted unpickler rejected: a truncated file, a CSV, ...
            raise InputError(
                f"{path} is not a model file torch can read ({type(exc).__name__}: {exc}). {EXPORT_HINT}"
            ) from None
        raise UnsafeModelError(
            f"refused to load {path}: it is a pickle that needs arbitrary Python objects to load "
            f"({type(exc).__name__}), which could run code. Nothing from it was executed. {EXPORT_HINT}"
        ) from None
    if isinstance(obj, dict) and all(isinstance(v, torch.Tensor) for v in obj.values()):
        if factory is None:
            raise InputError(
                f"{path} holds a state dict ({len(obj)} tensors) but no model factory was given; "
                "pass factory=..., or export the model with TorchScript"
            )
        model = factory()
        try:
            model.load_state_dict(obj)
        except RuntimeError as exc:  # missing/unexpected keys or shape mismatches
            raise InputError(f"{path}: the state dict does not fit the module built by the factory: {exc}") from None
        model.eval()
        return model
    raise InputError(f"{path} is not a model file (found {type(obj).__name__}). {EXPORT_HINT}")


def _load_torchscript(path: Path, data: bytes):
    """The TorchScript module in ``data`` (the file's bytes as read once and checked; ``path`` names it)."""
    try:
        return torch.jit.load(io.BytesIO(data), map_location="cpu")
    except Exception as exc:
        raise InputError(f"cannot load TorchScript model {path}: {exc}") from exc


def _probed(path: Path, fmt: str, limits, load: Callable, trusted_types: Sequence[str] = (), *,
            sha256: str | None = None):
    """``load()`` once :func:`~faux_checks.inputs.probe.probe_load` passed the file (fails closed).

    ``sha256``: of the bytes ``load()`` reads (a torch file read once): the probe loads those bytes or refuses
    the file as changed. A probe whose loader raised a Python error: ``load()`` runs to give the library's own
    words on the file (its error propagates); a file that loads here all the same is refused with the probe's
    error. Every other probe failure (killed, out of memory or time, could not run, the file changed)
    propagates and nothing is loaded.
    """
    from .probe import LoaderRaisedError, probe_load

    try:
        probe_load(path, fmt, trusted_types=trusted_types, limits=limits, sha256=sha256)
    except LoaderRaisedError as raised:
        load()
        raise raised from None
    return load()


def save_torchscript(model: torch.nn.Module, path: str | Path, *, example: torch.Tensor | None = None) -> Path:
    """Save ``model`` as TorchScript (scripted, or traced on ``example``); never overwrites."""
    path = Path(path)
    if path.exists():
        raise InputError(f"{path} exists already; choose another path (nothing is overwritten)")
    with eval_mode(model):  # restores every submodule's own flag afterwards
        scripted = torch.jit.trace(model, example) if example is not None else torch.jit.script(model)
    torch.jit.save(scripted, str(path))
    return path


def model_sha256(path: str | Path) -> str:
    """Hex sha256 of a model file (its provenance): :func:`faux_checks.provenance.file_sha256`."""
    return file_sha256(path)
