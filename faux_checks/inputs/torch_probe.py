"""A probe server for torch model files: torch imported once, each load in a forked, limited process.

Why (issue 25, bad input 5; measured on the loaded 2-core machine): a 1,937-byte TorchScript archive whose
``code/`` nests 200,000 parentheses passes every structural check and kills ``torch.jit.load`` with
``SIGSEGV``, so in the gate it would end the whole run. A one-shot probe process pays its torch import on
every load (4.9 s for a TorchScript file, 10.1 s for a ``.pt2``, ~295 MiB peak RSS, against a gate version
of ~7.5 s); this server pays it once per process: it imports torch, then forks one process per file
(``_probe_child.py serve``), which sets ``RLIMIT_AS`` and loads the file. A crash, the memory limit or the
time limit ends that forked process only; the server says how it ended.

The server is started on the first torch probe of a process and ends when that process does (its input
closes); one request at a time (a lock). Only :func:`faux_checks.inputs.limits.probe_load` calls it.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["ProbeResult", "probe_torch_file", "stop_server"]

_SCRIPT = Path(__file__).with_name("_probe_child.py")
_LOCK = threading.Lock()
_server: subprocess.Popen | None = None


class ProbeResult:
    """How a probe load ended: ``returncode`` as :mod:`subprocess` gives it (negative: killed by that
    signal; 0: loaded; 3: a Python error) and ``stderr`` (bytes: the error's type and message)."""

    def __init__(self, returncode: int, stderr: bytes):
        self.returncode, self.stderr = returncode, stderr


def _readline(proc: subprocess.Popen, timeout_s: float) -> str | None:
    assert proc.stdout is not None                  # started with stdout=PIPE (_start)
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    return proc.stdout.readline().decode("utf-8", "replace") if ready else None


def _start(timeout_s: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(_SCRIPT), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    line = _readline(proc, timeout_s)
    if line is None or line.strip() != "ready":
        proc.kill()
        proc.wait()
        raise subprocess.TimeoutExpired(proc.args, timeout_s)
    return proc


def stop_server() -> None:
    """End this process's probe server, if one runs (tests; it also ends with its parent)."""
    global _server
    with _LOCK:
        if _server is not None:
            _server.kill()
            _server.wait()
            _server = None


def probe_torch_file(path: str | Path, fmt: str, memory_mib: int, timeout_s: float, *,
                     sha256: str | None = None) -> ProbeResult:
    """Load ``path`` (``"torchscript"`` or ``"torch.export"``) in a forked process of the probe server.

    Parameters
    ----------
    path : str or Path
        The model file (a ``torch.export`` one already passed
        :func:`~faux_checks.inputs.export_archive.check_export_archive`: the server loads with
        ``weights_only`` forced).
    fmt : str
        ``"torchscript"`` or ``"torch.export"``.
    memory_mib : int
        Address-space limit of the forked process (MiB).
    timeout_s : float
        Limit on the load (seconds); the server's start (its torch import) gets the same again.
    sha256 : str, optional
        Hex sha256 of the bytes the caller checked: the forked process reads the file once, exits 4
        (:data:`~faux_checks.inputs.limits.CHANGED_EXIT`) when its hash differs, and loads that copy from memory.

    Returns
    -------
    ProbeResult

    Raises
    ------
    subprocess.TimeoutExpired
        The server did not start, or the load did not finish, within ``timeout_s``.
    """
    global _server
    request = json.dumps({"fmt": fmt, "path": str(path), "memory_mib": int(memory_mib), "timeout_s": timeout_s,
                          "sha256": sha256})
    with _LOCK:
        for _attempt in (0, 1):                      # a server that died (killed from outside) is started again
            if _server is None or _server.poll() is not None:
                _server = _start(timeout_s)
            assert _server.stdin is not None        # started with stdin=PIPE (_start)
            try:
                _server.stdin.write(request.encode() + b"\n")
                _server.stdin.flush()
            except (BrokenPipeError, OSError):
                _server = None
                continue
            line = _readline(_server, timeout_s + 5.0)   # the server kills the load at timeout_s itself
            if line is None:
                _server.kill()
                _server.wait()
                _server = None
                raise subprocess.TimeoutExpired([str(_SCRIPT), "serve"], timeout_s)
            if not line:                            # the server ended
                _server = None
                continue
            reply = json.loads(line)
            if reply["status"] == "timeout":
                raise subprocess.TimeoutExpired([str(_SCRIPT), "serve"], timeout_s)
            if reply["status"] == "signal":
                return ProbeResult(-int(reply["code"]), reply["stderr"].encode())
            if reply["status"] == "exit":
                return ProbeResult(int(reply["code"]), reply["stderr"].encode())
            return ProbeResult(3, reply["stderr"].encode())   # a request the server could not read
        raise subprocess.TimeoutExpired([str(_SCRIPT), "serve"], timeout_s)
