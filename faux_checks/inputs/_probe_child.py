"""Child of :func:`faux_checks.inputs.limits.probe_load`: limit memory, then load one model file (private).

Run by path (``python _probe_child.py FORMAT PATH MEMORY_MIB TRUSTED_JSON``), so that it imports the
model's library only. Exit 0: loaded; 3: a Python error (its type and message on stderr); a signal or
another code: the loader died.

``python _probe_child.py serve``: the torch probe server of :mod:`faux_checks.inputs.torch_probe`. It
imports torch once (with every ``torch.load`` forced to ``weights_only``: ``TORCH_FORCE_WEIGHTS_ONLY_LOAD``,
set before the import), prints ``ready``, then for each JSON request line ``{"fmt", "path",
"memory_mib", "timeout_s", "sha256"}`` forks a process that limits its address space, reads the file once,
exits :data:`CHANGED_EXIT` when those bytes' sha256 is not the request's (the caller checked other bytes) and
loads that copy from memory (``torchscript``: ``torch.jit.load`` on the CPU; ``torch.export``:
``torch.export.load(...).module()``, after the caller's
:func:`~faux_checks.inputs.export_archive.check_export_archive`; nothing is called), and answers one JSON line ``{"status": "exit" | "signal" | "timeout", "code", "stderr"}``. It ends at
the end of its input (its parent gone); a load still running when the parent goes is killed at once.
"""

import hashlib
import io
import json
import os
import resource
import sys
import time

#: Exit code of a probe whose file's bytes are not those the caller checked (``limits.CHANGED_EXIT``).
CHANGED_EXIT = 4


class _Changed(Exception):
    """The file's bytes are not those whose sha256 the request carries."""


def _checked_copy(path: str, sha256: str | None):
    """The file's bytes, read once, as a file object; :class:`_Changed` when their sha256 is not ``sha256``."""
    with open(path, "rb") as fh:
        data = fh.read()
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise _Changed(f"{path} changed after it was checked")
    return io.BytesIO(data)


def _load(fmt: str, path: str, trusted: list, sha256: str | None = None) -> None:
    if fmt == "torchscript":
        import torch

        torch.jit.load(_checked_copy(path, sha256), map_location="cpu")
    elif fmt == "torch.export":
        import torch

        torch.export.load(_checked_copy(path, sha256)).module()
    elif fmt == "lightgbm":
        import lightgbm

        lightgbm.Booster(model_file=path)
    elif fmt == "xgboost":
        import xgboost

        xgboost.Booster(model_file=path)
    elif fmt == "onnx":
        import onnxruntime

        onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    elif fmt == "skops":
        import skops.io as sio

        untrusted = sio.get_untrusted_types(file=path)
        if set(untrusted) - set(trusted):   # the caller refuses it without building anything
            return
        sio.load(path, trusted=list(untrusted))


def _limit(memory_mib: int) -> None:
    limit = memory_mib << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> int:
    fmt, path, memory_mib, trusted = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    _limit(memory_mib)
    if fmt == "torch.export":
        os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"      # read on every torch.load
        os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    try:
        _load(fmt, path, trusted)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
        print(f"{type(exc).__name__}: {str(exc)[:500]}", file=sys.stderr)
        return 3
    return 0


def _probe_forked(request: dict) -> dict:
    """Fork, load ``request['path']`` in the child under the memory limit, wait at most ``timeout_s``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the probe: nothing of it reaches the server
        os.close(read_end)
        code = 0
        try:
            _limit(int(request["memory_mib"]))
            _load(request["fmt"], request["path"], [], request.get("sha256"))
        except _Changed as exc:
            os.write(write_end, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
            code = CHANGED_EXIT
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
            os.write(write_end, f"{type(exc).__name__}: {str(exc)[:500]}".encode("utf-8", "replace"))
            code = 3
        os._exit(code)
    os.close(write_end)
    ends = time.monotonic() + float(request["timeout_s"])
    status = None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = raw
        elif time.monotonic() > ends or os.getppid() != _PARENT:   # out of time, or the gate is gone
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(read_end)
            return {"status": "timeout", "code": None, "stderr": ""}
        else:
            time.sleep(0.01)
    err = b""
    while chunk := os.read(read_end, 65536):
        err += chunk
    os.close(read_end)
    if os.WIFSIGNALED(status):
        return {"status": "signal", "code": os.WTERMSIG(status), "stderr": err.decode("utf-8", "replace")}
    return {"status": "exit", "code": os.WEXITSTATUS(status), "stderr": err.decode("utf-8", "replace")}


_PARENT = os.getppid()


def serve() -> int:
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    import torch  # noqa: F401 - imported once, before any fork

    print("ready", flush=True)
    warmed = False
    for line in sys.stdin:
        try:
            request = json.loads(line)
            if request["fmt"] == "torch.export" and not warmed:   # what torch.export.load imports: once, here
                import sympy  # noqa: F401
                import torch._export.serde.serialize  # noqa: F401
                import torch.export._unlift  # noqa: F401
                import torch.export.pt2_archive._package  # noqa: F401
                import torch.fx.experimental.symbolic_shapes  # noqa: F401
                import torch.fx.experimental.validator  # noqa: F401
                import torch.utils.serialization  # noqa: F401
                warmed = True
            reply = _probe_forked(request)
        except Exception as exc:  # noqa: BLE001 - a bad request: the client falls back
            reply = {"status": "error", "code": None, "stderr": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["serve"] else main())
