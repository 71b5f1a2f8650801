"""The model file formats the gate reads, one table entry each: detection, loader, capabilities, MLflow flavour.

:data:`FORMATS` is the one place a format is declared. :func:`detect_format` reads a file's first bytes
(and a zip's member names) against each entry in table order, so :func:`faux_checks.inputs.models.model_format`
(the ``model_format`` version tag, the report's model table) names every format here;
:func:`sniff_format` and :func:`load_forward_only` read the forward-only entries;
:mod:`faux_checks.registry.flavors` reads the MLflow flavour each entry is stored under. Nothing here
imports torch or a model library until a loader runs.

A new format is one module with its loader and one :class:`ModelFormat` line in :data:`FORMATS`.

=============  ================================  =============  ===================================
format         detected by                       gradients      MLflow flavour (safe files)
=============  ================================  =============  ===================================
onnx           protobuf, ``ir_version`` first;   no (forward)   ``onnx``: ``data`` (``.onnx``)
               ``onnx`` parses a graph
xgboost        JSON / UBJSON naming ``learner``  no (forward)   ``xgboost``: ``data`` (``.ubj``, ``.json``)
lightgbm       text starting ``tree``            no (forward)   ``lightgbm``: ``data`` (``.lgb``, ``.txt``,
                                                                ``.skops``)
skops          zip holding ``schema.json``       no (forward)   ``sklearn``: ``pickled_model`` (``.skops``)
torchscript    zip with ``code/`` and            yes            (the ``pytorch`` flavour:
               ``constants.pkl``                                 :mod:`faux_checks.registry.formats`)
torch.export   zip with ``serialized_exported_   yes            idem
               program.json`` or ``models/``
torch.save     zip with ``data.pkl`` or a        yes            refused unless ``allow_pickle``
               pickle's first byte ``0x80``                     (a state dict loads with a factory)
=============  ================================  =============  ===================================
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["FORMATS", "FORWARD_ONLY", "MlflowFlavor", "ModelFormat", "Sniff", "detect_format", "format_named",
           "load_forward_only", "sniff_format"]


class Sniff:
    """What detection reads of a file: its first kilobyte and, for a zip, its member names (read once)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            self.head = fh.read(1024)

    @cached_property
    def zip_names(self) -> list[str]:
        """Member names of a zip archive; [] for anything else."""
        if not self.head.startswith(b"PK"):
            return []
        try:
            with zipfile.ZipFile(self.path) as zf:
                return zf.namelist()
        except zipfile.BadZipFile:
            return []


@dataclass(frozen=True)
class MlflowFlavor:
    """The MLflow flavour a format is logged under: its name, the ``MLmodel`` key naming the file, safe suffixes."""

    name: str
    key: str
    safe_suffixes: tuple[str, ...]


@dataclass(frozen=True)
class ModelFormat:
    """One model file format.

    Attributes
    ----------
    name : str
        What ``model_format`` records (the version tag, the report).
    detect : callable
        ``detect(Sniff) -> bool`` from the file's content, never its name.
    differentiable : bool
        True: a torch module (gradients, every fAux variant); False: a forward-only target
        (:class:`~faux_checks.method.forward.ForwardOnlyTarget`, predictions only).
    safe : bool
        Loads without unpickling arbitrary objects (``torch.save`` only with a factory or ``allow_pickle``).
    load : callable or None
        ``load(path, trusted_types) -> model`` for a forward-only format; None for the torch formats,
        which :func:`~faux_checks.inputs.models.load_model` reads itself (zip limits, state dicts, the opt-in).
    suffixes : tuple of str
        The usual file suffixes (documentation; detection reads the content).
    flavors : tuple of MlflowFlavor
        MLflow flavours that store this format (:mod:`faux_checks.registry.flavors`).
    """

    name: str
    detect: Callable[[Sniff], bool]
    differentiable: bool
    safe: bool = True
    load: Callable[[Path, Sequence[str]], Any] | None = None
    suffixes: tuple[str, ...] = ()
    flavors: tuple[MlflowFlavor, ...] = field(default_factory=tuple)

    @property
    def forward_only(self) -> bool:
        """Queried for predictions only (no input gradient)."""
        return not self.differentiable


def _is_onnx(s: Sniff) -> bool:
    if s.head[:1] != b"\x08":
        return False
    try:
        import onnx
    except ImportError:
        return False
    try:
        model = onnx.load(str(s.path), load_external_data=False)
    except Exception:  # noqa: BLE001 - not an ONNX file: detection says no
        return False
    return bool(len(model.graph.node))


def _is_torchscript(s: Sniff) -> bool:
    names = s.zip_names
    return any(n.endswith("constants.pkl") for n in names) and any("/code/" in n for n in names)


def _is_export(s: Sniff) -> bool:
    return any(n.endswith("serialized_exported_program.json") or "/models/" in n for n in s.zip_names)


def _is_torch_save(s: Sniff) -> bool:
    return any(n.endswith("data.pkl") for n in s.zip_names) or (not s.zip_names and s.head[:1] == b"\x80")


def _forward_loader(name: str):
    def load(path, trusted_types: Sequence[str] = ()):
        from . import targets

        loader = {"onnx": targets.load_onnx, "xgboost": targets.load_xgboost, "lightgbm": targets.load_lightgbm}
        if name == "skops":
            return targets.load_skops(path, trusted_types=trusted_types)
        return loader[name](path)

    return load


#: name -> format, in detection order (the forward-only formats first: a skops zip is no torch archive;
#: TorchScript before ``torch.save``: a TorchScript archive holds a ``data.pkl`` too).
FORMATS: dict[str, ModelFormat] = {f.name: f for f in (
    ModelFormat("onnx", _is_onnx, differentiable=False, load=_forward_loader("onnx"), suffixes=(".onnx",),
                flavors=(MlflowFlavor("onnx", "data", (".onnx",)),)),
    ModelFormat("xgboost", lambda s: s.head.lstrip()[:1] == b"{" and b"learner" in s.head, differentiable=False,
                load=_forward_loader("xgboost"), suffixes=(".json", ".ubj"),
                flavors=(MlflowFlavor("xgboost", "data", (".ubj", ".json")),)),
    ModelFormat("lightgbm", lambda s: s.head.startswith((b"tree\n", b"tree\r\n")), differentiable=False,
                load=_forward_loader("lightgbm"), suffixes=(".txt", ".lgb"),
                flavors=(MlflowFlavor("lightgbm", "data", (".lgb", ".txt", ".skops")),)),
    ModelFormat("skops", lambda s: "schema.json" in s.zip_names, differentiable=False, load=_forward_loader("skops"),
                suffixes=(".skops",), flavors=(MlflowFlavor("sklearn", "pickled_model", (".skops",)),)),
    ModelFormat("torchscript", _is_torchscript, differentiable=True, suffixes=(".pt", ".pth")),
    ModelFormat("torch.export", _is_export, differentiable=True, suffixes=(".pt2",)),
    ModelFormat("torch.save", _is_torch_save, differentiable=True, safe=False, suffixes=(".pt", ".pth")),
)}


def detect_format(path: str | Path) -> ModelFormat | None:
    """The first entry of :data:`FORMATS` whose detection accepts ``path``'s content; None for none.

    Raises
    ------
    OSError
        ``path`` cannot be read.
    """
    sniff = Sniff(path)
    return next((fmt for fmt in FORMATS.values() if fmt.detect(sniff)), None)


def format_named(name: str) -> ModelFormat:
    """The entry called ``name``.

    Raises
    ------
    InputError
        No such format (the message lists the known ones).
    """
    from ..errors import InputError

    fmt = FORMATS.get(name)
    if fmt is None:
        raise InputError(f"unknown model format {name!r}; known: {list(FORMATS)}")
    return fmt


#: The forward-only formats' names (entries of :data:`FORMATS` without gradients), in detection order.
FORWARD_ONLY = tuple(name for name, fmt in FORMATS.items() if fmt.forward_only)


def sniff_format(path: str | Path) -> str | None:
    """The forward-only format of ``path`` from its content, or None (a PyTorch file or something else).

    The forward-only entries of :data:`FORMATS` decide: skops, a zip holding ``schema.json``; LightGBM, text
    starting ``tree``; XGBoost, JSON or UBJSON whose first kilobyte names ``learner``; ONNX, a protobuf starting
    with the ``ir_version`` field (byte 0x08) that ``onnx`` parses as a model with a graph.
    """
    fmt = detect_format(path)
    return fmt.name if fmt is not None and fmt.forward_only else None


def load_forward_only(path: str | Path, fmt: str, *, trusted_types: Sequence[str] = ()) -> Any:
    """Load ``path`` in the forward-only format ``fmt`` (an entry of :data:`FORWARD_ONLY`).

    Returns a :class:`faux_checks.method.forward.ForwardOnlyTarget` (the loaders in :mod:`faux_checks.inputs.targets`).

    Raises
    ------
    InputError
        ``fmt`` is not a forward-only format (the message lists them).
    """
    from ..errors import InputError

    entry = FORMATS.get(fmt)
    if entry is None or entry.load is None:
        raise InputError(f"unknown forward-only model format {fmt!r}; known: {list(FORWARD_ONLY)}")
    return entry.load(Path(path), trusted_types)
