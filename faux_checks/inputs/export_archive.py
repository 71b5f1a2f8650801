"""Reading a ``torch.export`` archive (``.pt2``) without running code from it.

``torch.export.load`` is not a safe loader (torch 2.13's own docstring: "uses pickle under the hood
... Never load data from an untrusted source"). Reading its code (``torch/export/pt2_archive/_package.py``,
``torch/_export/serde/serialize.py``, ``torch/export/_unlift.py``) shows five ways a crafted archive runs
code, each closed here before or while the archive is read:

==============================================  ==========================================================
what torch does with the archive                what this module does
==============================================  ==========================================================
sample inputs, legacy files: ``torch.load``      every ``torch.load`` during the read is forced to
with ``weights_only=True``, **then retries       ``weights_only=True`` (torch's own
with ``weights_only=False``**; weights and       ``TORCH_FORCE_WEIGHTS_ONLY_LOAD``), so the retry cannot
constants marked ``use_pickle``: ``False``        unpickle anything but tensors
constants ``opaque_obj_*`` (``pickle.loads``),   refused (their config entries are read first)
``custom_obj_*`` (TorchBind unpickler)
AOTInductor / ExecuTorch / MTIA payloads         refused (compiled native code)
(shared libraries)
``expr_str`` fields: ``sympy.sympify``, an       each parsed with :mod:`ast` first and refused unless it is
``eval``                                         arithmetic on symbols and a fixed list of sympy functions
``guards_code``: ``exec``-ed by ``.module()``    each parsed with :mod:`ast` first and refused unless it is
                                                 a comparison of ``L[...]`` sizes and numbers
node targets ``torch.<any attribute path>`` or   refused unless ``torch.ops.aten.*``/``torch.ops.prims.*``,
``_operator.*``: called on every forward          a fixed list of ``operator`` and ``torch.sym_*`` functions;
(``torch.os.system`` resolves)                   re-checked on the loaded graph
==============================================  ==========================================================

The bytes are read once and every check and the load work on that same copy (no file swapped between
the check and the load). An archive that needs more (custom operators, TorchBind objects, a pickled
constant) loads only with the explicit opt-in ``allow_pickle=True`` of
:func:`faux_checks.inputs.models.load_model`, which calls ``torch.export.load`` as it is.

Our reading of torch 2.13.0's loader; ``tests/inputs/test_models.py`` builds an archive with a payload for
each entry of the table and checks that its marker file is never created.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import threading
import zipfile
from contextlib import contextmanager
from typing import Iterator

from ..errors import InputError, UnsafeModelError

__all__ = ["load_export_archive", "check_export_archive"]

# Relative to the archive's root folder (torch.export.pt2_archive.constants, torch 2.13).
_NATIVE_DIRS = ("data/aotinductor/", "data/executorch/", "data/mtia")
_CONSTANTS_CONFIG = re.compile(r"^data/constants/(.+)_constants_config\.json$")
_MODEL_JSON = re.compile(r"^models/([^/]+)\.json$")

_ATEN_TARGET = re.compile(r"^torch\.ops\.(aten|prims)\.[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
_OPERATOR_TARGETS = frozenset(
    f"_operator.{name}"
    for name in (
        "getitem", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
        "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "not_", "xor",
    )
)
_OTHER_TARGETS = frozenset(
    ["math.ceil", "math.floor", "math.trunc", "math.sqrt"]
    + [f"torch.{name}" for name in ("sym_max", "sym_min", "sym_float", "sym_int", "sym_not", "sym_ite",
                                     "sym_sqrt", "sym_sum", "_sym_sqrt")]
)

# Names an expr_str may call or mention (the deserializer's own sympy_functions and sympy's core).
_SYMPY_NAMES = frozenset(
    """Symbol Integer Float Rational Add Mul Pow Mod Max Min Abs Eq Ne Lt Le Gt Ge And Or Not
    StrictLessThan StrictGreaterThan LessThan GreaterThan Equality Unequality floor ceiling sqrt
    FloorDiv ModularIndexing Where PythonMod CleanDiv CeilToInt FloorToInt CeilDiv LShift RShift
    PowByNatural FloatPow FloatTrueDiv IntTrueDiv IsNonOverlappingAndDenseIndicator TruncToFloat
    TruncToInt RoundToInt RoundDecimal ToFloat Identity oo zoo nan true false True False""".split()
)
_ASSUMPTIONS = frozenset(
    "positive negative nonnegative nonpositive integer real finite nonzero zero even odd rational".split()
)
_SYMBOL_NAME = re.compile(r"^[a-z]{1,6}[0-9]+$")  # s0, u3, zuf12: the names torch gives shape symbols
_SIZE_METHODS = frozenset({"size", "stride", "dim", "numel", "storage_offset"})

_MAX_EXPR_CHARS = 2_000

# TORCH_FORCE_WEIGHTS_ONLY_LOAD is read from the environment on every torch.load: the lock keeps two
# reads in this process from restoring each other's value early.
_LOAD_LOCK = threading.Lock()


def _refuse(path: str, what: str) -> UnsafeModelError:
    return UnsafeModelError(
        f"refused to load torch.export archive {path}: {what}. Nothing from it was executed. Re-export a "
        "plain network (torch.export.save(torch.export.export(model, (example,)), 'model.pt2')) or save it "
        "with torch.jit.save(torch.jit.script(model)); only if you trust the file's author, load it with "
        "allow_pickle=True (CLI: --allow-pickle)."
    )


def _check_target(path: str, target: object, where: str) -> None:
    if not isinstance(target, str):
        return
    if _ATEN_TARGET.match(target) or target in _OPERATOR_TARGETS or target in _OTHER_TARGETS:
        return
    raise _refuse(path, f"{where} calls {target[:120]!r}, which is not an ATen or prims operator")


def _expr_node_ok(node: ast.AST) -> bool:
    if isinstance(node, ast.Expression):
        return _expr_node_ok(node.body)
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, str):
            return bool(_SYMBOL_NAME.match(v))
        return v is None or isinstance(v, (bool, int, float))
    if isinstance(node, ast.Name):
        return node.id in _SYMPY_NAMES or bool(_SYMBOL_NAME.match(node.id))
    if isinstance(node, ast.BinOp):
        return _expr_node_ok(node.left) and _expr_node_ok(node.right)
    if isinstance(node, ast.UnaryOp):
        return _expr_node_ok(node.operand)
    if isinstance(node, ast.BoolOp):
        return all(_expr_node_ok(v) for v in node.values)
    if isinstance(node, ast.Compare):
        return _expr_node_ok(node.left) and all(_expr_node_ok(c) for c in node.comparators)
    if isinstance(node, ast.Call):
        return (
            isinstance(node.func, ast.Name)
            and node.func.id in _SYMPY_NAMES
            and all(_expr_node_ok(a) for a in node.args)
            and all(k.arg in _ASSUMPTIONS and isinstance(k.value, ast.Constant)
                    and isinstance(k.value.value, bool) for k in node.keywords)
        )
    return False


def _guard_node_ok(node: ast.AST) -> bool:
    if isinstance(node, ast.Expression):
        return _guard_node_ok(node.body)
    if isinstance(node, ast.Constant):
        return node.value is None or isinstance(node.value, (bool, int, float, str))
    if isinstance(node, ast.Name):
        return node.id == "L"
    if isinstance(node, ast.Subscript):
        return _guard_node_ok(node.value) and _guard_node_ok(node.slice)
    if isinstance(node, ast.Attribute):  # math.inf
        return isinstance(node.value, ast.Name) and node.value.id == "math" and node.attr in ("inf", "nan", "pi")
    if isinstance(node, ast.Call):  # L['x'].size()[1], math.floor(...)
        func = node.func
        if not isinstance(func, ast.Attribute):
            return False
        if isinstance(func.value, ast.Name) and func.value.id == "math":
            ok_func = func.attr in ("floor", "ceil", "trunc", "sqrt", "isnan")
        else:
            ok_func = func.attr in _SIZE_METHODS and _guard_node_ok(func.value)
        return ok_func and not node.keywords and all(_guard_node_ok(a) for a in node.args)
    if isinstance(node, ast.BinOp):
        return _guard_node_ok(node.left) and _guard_node_ok(node.right)
    if isinstance(node, ast.UnaryOp):
        return _guard_node_ok(node.operand)
    if isinstance(node, ast.BoolOp):
        return all(_guard_node_ok(v) for v in node.values)
    if isinstance(node, ast.Compare):
        return _guard_node_ok(node.left) and all(_guard_node_ok(c) for c in node.comparators)
    return False


def _check_code(path: str, text: object, where: str, ok) -> None:
    if not isinstance(text, str):
        raise _refuse(path, f"{where} is not a string")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        tree = None
    if len(text) > _MAX_EXPR_CHARS or tree is None or not ok(tree):
        raise _refuse(path, f"{where} {text[:120]!r} is not a plain shape expression (torch evaluates it as code)")


def _walk_program(path: str, obj: object, where: str) -> None:
    """Check every node target, operator argument and symbolic expression of a serialized program."""
    stack = [(obj, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict):
            if "target" in item and "inputs" in item and "outputs" in item:  # a graph node
                _check_target(path, item["target"], f"node {item.get('name', '?')!r}")
            for key, value in item.items():
                if key == "expr_str":
                    _check_code(path, value, f"the symbolic expression at {at}", _expr_node_ok)
                elif key == "as_operator":
                    _check_target(path, value, f"an operator argument at {at}")
                elif key.startswith("as_custom_obj"):
                    raise _refuse(path, f"{at} holds a TorchBind object ({key})")
                else:
                    stack.append((value, f"{at}/{key}"))
        elif isinstance(item, list):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(item))


def check_export_archive(data: bytes, path: str = "<archive>") -> None:
    """Refuse a ``torch.export`` archive that would run code when read or called (the module docstring's table).

    Parameters
    ----------
    data : bytes
        The whole archive, as read once from the file.
    path : str
        For messages.

    Raises
    ------
    UnsafeModelError
        The archive holds native code, a pickled or TorchBind constant, a node that calls anything but an
        ATen/prims operator or a listed ``operator``/``torch.sym_*`` function, or an expression or guard that
        is not plain arithmetic on shapes; the message names what was found.
    InputError
        Not a zip archive, or a program file that is not JSON.
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise InputError(f"{path} is not a torch.export archive (not a zip file)") from None
    with zf:
        names = zf.namelist()
        roots = {n.split("/", 1)[0] for n in names if "/" in n}
        rel = [n.split("/", 1)[1] if "/" in n else n for n in names]
        if len(roots) != 1:
            raise _refuse(path, f"it has {len(roots)} top-level folders {sorted(roots)[:5]} (torch.export.save writes one)")
        if any(r.endswith("serialized_exported_program.json") for r in rel) or not any(_MODEL_JSON.match(r) for r in rel):
            raise InputError(
                f"{path} is a torch.export archive of the format before torch 2.7, which torch reads through a pickle "
                "fallback; re-save it with torch.export.save on torch >= 2.7"
            )
        native = sorted({r for r in rel if r.startswith(_NATIVE_DIRS)})
        if native:
            raise _refuse(path, f"it holds compiled native code ({len(native)} files, e.g. {native[0]!r})")
        for full, r in zip(names, rel, strict=True):
            m = _CONSTANTS_CONFIG.match(r)
            if m:
                try:
                    config = json.loads(zf.read(full)).get("config", {})
                except (ValueError, AttributeError):
                    raise _refuse(path, f"{r} is not a JSON constants table") from None
                for fqn, meta in config.items():
                    name = str(meta.get("path_name", "")) if isinstance(meta, dict) else ""
                    if not name.startswith("tensor_"):
                        raise _refuse(path, f"constant {fqn!r} is a Python or TorchBind object ({name[:60]!r}), "
                                            "read with an unrestricted unpickler")
            elif _MODEL_JSON.match(r):
                try:
                    program = json.loads(zf.read(full))
                except ValueError as exc:
                    raise InputError(f"{path}: {r} is not valid JSON ({exc})") from None
                if not isinstance(program, dict):
                    raise InputError(f"{path}: {r} is not a serialized exported program")
                for i, guard in enumerate(program.get("guards_code") or []):
                    _check_code(path, guard, f"guard {i}", _guard_node_ok)
                _walk_program(path, program, r)


@contextmanager
def _weights_only_loads() -> Iterator[None]:
    """Every ``torch.load`` inside is ``weights_only=True``, whatever its caller asks (torch's own switch)."""
    key, off = "TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"
    with _LOAD_LOCK:
        saved = {k: os.environ.get(k) for k in (key, off)}
        os.environ[key] = "1"
        os.environ.pop(off, None)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _check_loaded_graph(path: str, program) -> None:
    import operator

    import torch

    allowed = {getattr(operator, t.split(".", 1)[1]) for t in _OPERATOR_TARGETS}
    allowed |= {getattr(torch, t.split(".", 1)[1]) for t in _OTHER_TARGETS if t.startswith("torch.") and hasattr(torch, t.split(".", 1)[1])}
    for node in program.graph.nodes:
        if node.op == "call_function":
            t = node.target
            if isinstance(t, torch._ops.OpOverload) and t.namespace in ("aten", "prims"):
                continue
            if t in allowed:
                continue
            raise _refuse(path, f"its loaded graph calls {t!r} (node {node.name!r})")
        elif node.op not in ("placeholder", "output", "get_attr"):
            raise _refuse(path, f"its loaded graph has a {node.op!r} node ({node.name!r})")


def load_export_archive(data: bytes, path: str = "<archive>"):
    """Load a checked ``torch.export`` archive as a module (the module docstring's table).

    Parameters
    ----------
    data : bytes
        The whole archive, as read once from the file: checked and loaded from this same copy.
    path : str
        For messages.

    Returns
    -------
    torch.nn.Module
        ``ExportedProgram.module()``, as exported (it refuses ``eval()``).

    Raises
    ------
    UnsafeModelError
        :func:`check_export_archive` refused it, or a pickle inside it needed more than tensors.
    InputError
        torch could not read it for another reason (the message gives torch's).
    """
    import pickle

    import torch

    check_export_archive(data, path)
    try:
        with _weights_only_loads():
            program = torch.export.load(io.BytesIO(data))
    except pickle.UnpicklingError as exc:
        raise _refuse(path, f"a pickle inside it needs arbitrary Python objects ({str(exc).splitlines()[0][:200]})") from None
    except Exception as exc:  # noqa: BLE001 - torch.export's own error, carried in the InputError
        raise InputError(f"cannot load torch.export model {path}: {type(exc).__name__}: {exc}") from None
    _check_loaded_graph(path, program)
    try:
        return program.module()
    except Exception as exc:  # noqa: BLE001 - torch.export's own error, carried in the InputError
        raise InputError(f"cannot build a module from torch.export model {path}: {type(exc).__name__}: {exc}") from None
