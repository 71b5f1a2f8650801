"""Resource limits on model files: archive bombs, absurd tree models, loaders that abort.

A model file is checked before it is loaded, in this order (the cases it guards against: a 2 MB zip named
``model.pt`` that unpacks to 2.6 GB; a 4.5 KB LightGBM text file with ``num_leaves=2000000000`` whose load aborts
the process (exit 134), which in a gate would leave the version ``running``):

1. :func:`check_archive`: a zip archive (TorchScript ``.pt``, torch.export ``.pt2``, skops) whose members unpack
   to more than ``max_model_bytes`` in total, or that unpacks to more than 16 MiB at more than
   ``max_compression_ratio`` times its packed size, is refused from its central directory (nothing unpacked).
2. :func:`check_tree_model`: a LightGBM text file (every ``num_leaves=`` line, the ``Tree=`` count) or an XGBoost
   JSON file (trees, nodes per tree, depth) past ``max_trees`` / ``max_leaves`` / ``max_tree_depth`` is refused
   by reading the text, before the library allocates anything.
3. :func:`~faux_checks.inputs.probe.probe_load` (:mod:`faux_checks.inputs.probe`): the file is loaded first by its
   library in a child process whose address space (``probe_memory_mb``) and load time (``probe_timeout_s``)
   are limited; only a load that exited 0 passes, and the gate records a version whose probe did not
   ``undecided`` and goes on.

The limits are the policy's ``[operations]`` (outside the policy hash: they never change a decision, only
whether one is reached): :func:`set_model_limits` applies them to this process, as
:func:`faux_checks.registry.operations.apply_client_settings` does MLflow's timeouts.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

__all__ = ["ModelLimits", "check_archive", "check_tree_model", "model_limits", "read_ubjson", "set_model_limits"]

#: An archive smaller than this unpacked is never refused for its compression ratio.
RATIO_FLOOR_BYTES = 16 << 20


@dataclass(frozen=True)
class ModelLimits:
    """The limits of :mod:`faux_checks.inputs.limits` (defaults: :class:`~faux_checks.gate.policy.OperationsSettings`).

    ``probe=False`` loads in this process only (for callers that isolate the load themselves);
    ``probe_torch=True`` probes TorchScript and ``torch.export`` files too (set by the gate's run).
    """

    max_model_bytes: int = 1 << 30
    max_compression_ratio: float = 200.0
    max_trees: int = 100_000
    max_leaves: int = 1 << 20
    max_tree_depth: int = 1000
    probe_memory_mb: int = 16_384
    probe_timeout_s: float = 120.0
    probe: bool = True
    probe_torch: bool = False

    @classmethod
    def from_operations(cls, operations, *, probe_torch: bool = False) -> "ModelLimits":
        """The limits of a policy's ``[operations]`` (``probe_torch``: as the class says)."""
        names = {f.name for f in dataclasses.fields(cls)} - {"probe", "probe_torch"}
        return cls(**{n: getattr(operations, n) for n in names}, probe_torch=probe_torch)


_current = ModelLimits()


def set_model_limits(operations_or_limits, *, probe_torch: bool = False) -> ModelLimits:
    """Apply ``[operations]`` (or a :class:`ModelLimits`) to every later model load of this process; returns them.

    ``probe_torch`` (with ``[operations]`` only): probe TorchScript and ``torch.export`` loads too (the gate).
    """
    global _current
    _current = (operations_or_limits if isinstance(operations_or_limits, ModelLimits)
                else ModelLimits.from_operations(operations_or_limits, probe_torch=probe_torch))
    return _current


def model_limits() -> ModelLimits:
    """The limits in force (:func:`set_model_limits`)."""
    return _current


def check_archive(path: str | Path | bytes, limits: ModelLimits | None = None, *, name: str | None = None) -> None:
    """Refuse a zip archive that would unpack past the limits, from its central directory only.

    ``path`` is the file, or its bytes as read once (then ``name`` is the file's name in messages).

    Raises
    ------
    InputError
        Total unpacked size over ``max_model_bytes``, or over 16 MiB unpacked at a ratio over
        ``max_compression_ratio``: sizes, ratio, the largest member and the setting to change.
    """
    limits = limits or _current
    label = name or ("<archive>" if isinstance(path, bytes) else str(path))
    try:
        with zipfile.ZipFile(io.BytesIO(path) if isinstance(path, bytes) else path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError):
        return                                      # not an archive: the loader says what it is
    unpacked = sum(i.file_size for i in infos)
    packed = sum(i.compress_size for i in infos)
    ratio = unpacked / max(packed, 1)
    biggest = max(infos, key=lambda i: i.file_size, default=None)
    where = f" (largest member {biggest.filename!r}: {biggest.file_size:,} bytes)" if biggest is not None else ""
    if unpacked > limits.max_model_bytes:
        raise InputError(
            f"refused to load {label}: its {len(infos)} archive members unpack to {unpacked:,} bytes, more than the "
            f"limit of {limits.max_model_bytes:,} bytes ([operations] max_model_bytes){where}; a tabular model is far "
            "smaller, so this is a damaged or hostile file. Nothing from it was unpacked.")
    if unpacked > RATIO_FLOOR_BYTES and ratio > limits.max_compression_ratio:
        raise InputError(
            f"refused to load {label}: its archive members unpack to {unpacked:,} bytes from {packed:,} ({ratio:,.0f} "
            f"times){where}, over the limit of {limits.max_compression_ratio:g} times ([operations] "
            "max_compression_ratio): a zip bomb, or a model to save without compression. Nothing from it was unpacked.")


_LGB_TREE = re.compile(rb"^Tree=\d+\s*$")
_LGB_LEAVES = re.compile(rb"^num_leaves=(\S*)\s*$")


def check_tree_model(path: str | Path, fmt: str, limits: ModelLimits | None = None) -> None:
    """Refuse a LightGBM text or XGBoost JSON model past ``max_trees`` / ``max_leaves`` / ``max_tree_depth``.

    LightGBM: every ``num_leaves=`` line (header and trees) and the count of ``Tree=`` lines, read line by
    line. XGBoost JSON: ``learner.gradient_booster`` trees (gbtree and dart), each tree's node count
    (``tree_param.num_nodes`` and its arrays) and depth from ``left_children`` / ``right_children``.
    XGBoost UBJ: the same checks, on the file decoded by :func:`read_ubjson` (a bounded reader: no count
    may claim more elements than the bytes left could hold, so a hostile count allocates nothing).
    Other formats: nothing checked.

    Raises
    ------
    InputError
        Naming the tree, the count found, the limit and the ``[operations]`` setting.
    """
    limits = limits or _current
    if fmt == "lightgbm":
        _check_lightgbm(Path(path), limits)
    elif fmt == "xgboost":
        _check_xgboost_json(Path(path), limits)


#: UBJSON fixed-size markers (draft 12, as XGBoost's ``save_model('*.ubj')`` writes) -> numpy big-endian dtype.
_UBJ_NUM = {b"i": ">i1", b"U": ">u1", b"I": ">i2", b"l": ">i4", b"L": ">i8", b"d": ">f4", b"D": ">f8"}


def read_ubjson(data: bytes):
    """Decode UBJSON (draft 12: the subset XGBoost writes, optimised ``$``/``#`` containers included).

    Bounded: every count is checked against the bytes left before anything is allocated, so a 4 KB file
    cannot claim a billion elements; nesting deeper than 64 levels is refused. Typed numeric arrays come
    back as lists (decoded with numpy).

    Raises
    ------
    ValueError
        Not UBJSON, truncated, or a count past the data.
    """
    reader = _UbjsonReader(data)
    return reader.value(bytes(reader.take(1)), 0)


class _UbjsonReader:
    """One pass over UBJSON bytes (:func:`read_ubjson`): ``pos`` is the next byte, every read is bounds-checked."""

    def __init__(self, data: bytes):
        self.view = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        """The next ``n`` bytes; :class:`ValueError` when fewer are left."""
        if n < 0 or self.pos + n > len(self.view):
            raise ValueError(f"UBJSON truncated or a count past the data at byte {self.pos}")
        out = self.view[self.pos:self.pos + n]
        self.pos += n
        return out

    def count(self) -> int:
        """A length or count: an integer marker and its value, no larger than the bytes left."""
        import numpy as np

        marker = bytes(self.take(1))
        if marker not in _UBJ_NUM or marker in (b"d", b"D"):
            raise ValueError(f"UBJSON length with marker {marker!r} at byte {self.pos - 1}")
        n = int(np.frombuffer(self.take(np.dtype(_UBJ_NUM[marker]).itemsize), _UBJ_NUM[marker])[0])
        if n < 0 or n > len(self.view) - self.pos:
            raise ValueError(f"UBJSON count {n:,} at byte {self.pos} is past the {len(self.view) - self.pos:,} bytes left")
        return n

    def value(self, marker: bytes, depth: int):
        """The value of type ``marker`` at nesting ``depth`` (at most 64)."""
        import numpy as np

        if depth > 64:
            raise ValueError("UBJSON nested deeper than 64 levels")
        if marker in _UBJ_NUM:
            dtype = np.dtype(_UBJ_NUM[marker])
            return np.frombuffer(self.take(dtype.itemsize), dtype)[0].item()
        if marker == b"Z" or marker == b"N":
            return None
        if marker in (b"T", b"F"):
            return marker == b"T"
        if marker == b"C":
            return bytes(self.take(1)).decode("latin-1")
        if marker in (b"S", b"H"):
            return bytes(self.take(self.count())).decode("utf-8", "replace")
        if marker in (b"[", b"{"):
            return self.container(marker, depth)
        raise ValueError(f"UBJSON marker {marker!r} at byte {self.pos - 1}")

    def container(self, kind: bytes, depth: int):
        """An array (``[``) or object (``{``): optimised (``$`` type, ``#`` count; a typed numeric array decoded at
        once with numpy) or ended by its closing marker."""
        import numpy as np

        view = self.view
        typed = n = None
        if view[self.pos:self.pos + 1] == b"$":
            self.take(1)
            typed = bytes(self.take(1))
            if view[self.pos:self.pos + 1] != b"#":
                raise ValueError(f"UBJSON typed container without a count at byte {self.pos}")
        if view[self.pos:self.pos + 1] == b"#":
            self.take(1)
            n = self.count()
        if kind == b"[" and typed in _UBJ_NUM and n is not None:
            dtype = np.dtype(_UBJ_NUM[typed])
            if n * dtype.itemsize > len(view) - self.pos:
                raise ValueError(f"UBJSON array of {n:,} {dtype} past the data at byte {self.pos}")
            return np.frombuffer(self.take(n * dtype.itemsize), dtype).tolist()
        items: list = []
        out: dict = {}
        i = 0
        while True:
            if n is not None:
                if i == n:
                    break
            elif view[self.pos:self.pos + 1] == (b"]" if kind == b"[" else b"}"):
                self.take(1)
                break
            if kind == b"{":
                key = bytes(self.take(self.count())).decode("utf-8", "replace")
                out[key] = self.value(typed or bytes(self.take(1)), depth + 1)
            else:
                items.append(self.value(typed or bytes(self.take(1)), depth + 1))
            i += 1
        return out if kind == b"{" else items


def _too_many(path, what: str, found, limit: int, setting: str) -> InputError:
    return InputError(f"refused to load {path}: {what} {found}, over the limit of {limit:,} ([operations] {setting}); "
                      "a damaged or hostile model file (nothing was allocated for it). Raise the setting only for a "
                      "model you know is that large")


def _check_lightgbm(path: Path, limits: ModelLimits) -> None:
    trees = 0
    with open(path, "rb") as fh:
        for line in fh:
            if _LGB_TREE.match(line):
                trees += 1
                if trees > limits.max_trees:
                    raise _too_many(path, "it has", f"more than {limits.max_trees:,} trees", limits.max_trees,
                                    "max_trees")
                continue
            m = _LGB_LEAVES.match(line)
            if m:
                raw = m.group(1).decode("ascii", "replace")
                try:
                    leaves = int(raw)
                except ValueError:
                    raise InputError(f"refused to load {path}: tree {max(trees - 1, 0)} has num_leaves={raw!r}, not "
                                     "a whole number; a damaged model file") from None
                if leaves > limits.max_leaves or leaves < 0:
                    raise _too_many(path, f"tree {max(trees - 1, 0)} has num_leaves =", f"{leaves:,}",
                                    limits.max_leaves, "max_leaves")


def _check_xgboost_json(path: Path, limits: ModelLimits) -> None:
    raw = path.read_bytes()
    try:
        payload = json.loads(raw)
    except ValueError:                              # UBJ (it starts with "{" too)
        try:
            payload = read_ubjson(raw)
        except ValueError:
            return                                  # not a model this reads: XGBoost's loader says why
    _check_xgboost_payload(path, payload, limits)


def _check_xgboost_payload(path: Path, payload, limits: ModelLimits) -> None:
    """Trees, nodes and depth of a decoded XGBoost model (JSON or UBJ) against the limits."""
    try:
        booster = payload["learner"]["gradient_booster"]
    except (KeyError, TypeError):
        return                                      # not a model this reads: XGBoost's loader says why
    model = booster.get("model") or (booster.get("gbtree") or {}).get("model") or {}
    trees = model.get("trees") or []
    if len(trees) > limits.max_trees:
        raise _too_many(path, "it has", f"{len(trees):,} trees", limits.max_trees, "max_trees")
    max_nodes = 2 * limits.max_leaves
    for i, tree in enumerate(trees):
        left, right = tree.get("left_children") or [], tree.get("right_children") or []
        try:
            declared = int((tree.get("tree_param") or {}).get("num_nodes", len(left)))
        except (TypeError, ValueError):
            declared = len(left)
        nodes = max(declared, len(left), len(right))
        if nodes > max_nodes:
            raise _too_many(path, f"tree {i} has", f"{nodes:,} nodes", max_nodes, "max_leaves (x 2 nodes)")
        depth = _depth(left, right)
        if depth > limits.max_tree_depth:
            raise _too_many(path, f"tree {i} is", f"{depth:,} levels deep", limits.max_tree_depth, "max_tree_depth")


def _depth(left: list, right: list) -> int:
    """Levels of a tree given as child-index arrays (-1: leaf); a cycle or bad index counts as too deep."""
    if not left:
        return 0
    n, deepest, stack, seen = len(left), 0, [(0, 1)], 0
    while stack:
        node, level = stack.pop()
        seen += 1
        if seen > n:                                # a cycle: never a tree
            return 1 << 30
        deepest = max(deepest, level)
        for child in (left[node], right[node] if node < len(right) else -1):
            if isinstance(child, int) and 0 <= child < n:
                stack.append((child, level + 1))
    return deepest
