"""A probe server for torch model files: torch imported once, each load in a forked, limited process.

Why (measured on the loaded 2-core machine): a 1,937-byte TorchScript archive whose
``code/`` nests 200,000 parentheses passes every structural check and kills ``torch.jit.load`` with
``SIGSEGV``, so in the gate it would end the whole run. A one-shot probe process pays its torch import on
every load (4.9 s for a TorchScript file, 10.1 s for a ``.pt2``, ~295 MiB peak RSS, against a gate version
of ~7.5 s); this server pays it once per process: it imports torch, then forks one process per file
(``_probe_child.py serve``), which sets ``RLIMIT_AS`` and loads the file. A crash, the memory limit or the
time limit ends that forked process only; the server says how it ended.

The server is started on the first torch probe of a process and ends when that process does (its input
closes); one request at a time (a lock). Only :func:`faux_checks.inputs.probe.probe_load` calls it.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
import uuid
from pathlib import Path

#: Bound (s) on a probe process's start, apart from ``probe_timeout_s``: the interpreter and the model's library
#: importing (the file plays no part; seconds when idle, minutes on a loaded machine). Every probe reads it here.
STARTUP_TIMEOUT_S = 600.0
#: Exit code of a probe that could not run (``_probe_child.SETUP_FAILED``; the server gives it when it did not
#: start, ended twice, could not fork or answered out of turn). Distinct from ``probe.CHANGED_EXIT`` (4).
PROBE_NOT_RUN = 5

__all__ = ["PROBE_NOT_RUN", "STARTUP_TIMEOUT_S", "ProbeResult", "probe_torch_file", "stop_server"]

_SCRIPT = Path(__file__).with_name("_probe_child.py")
_LOCK = threading.Lock()
_server: subprocess.Popen | None = None


class ProbeResult:
    """How a probe load ended: ``returncode`` as :mod:`subprocess` gives it (negative: killed by that
    signal; 0: loaded; 3: the loader raised a Python error; :data:`~faux_checks.inputs.probe.CHANGED_EXIT`
    (4): the file's bytes are not those the caller checked; :data:`~PROBE_NOT_RUN`
    (5): the probe could not run: the server did not start, ended twice, could not fork, or answered out of
    turn) and ``stderr`` (bytes: the cause)."""

    def __init__(self, returncode: int, stderr: bytes):
        self.returncode, self.stderr = returncode, stderr


def _readline(proc: subprocess.Popen, timeout_s: float) -> str | None:
    assert proc.stdout is not None                  # started with stdout=PIPE (_start)
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    return proc.stdout.readline().decode("utf-8", "replace") if ready else None


def _start(timeout_s: float) -> subprocess.Popen | None:
    """A started server, or None (killed) when it did not say ``ready`` within ``timeout_s``."""
    proc = subprocess.Popen([sys.executable, str(_SCRIPT), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        line = _readline(proc, timeout_s)
    except BaseException:
        _kill(proc)
        raise
    if line is None or line.strip() != "ready":
        _kill(proc)
        return None
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


def stop_server() -> None:
    """End this process's probe server, if one runs (tests; it also ends with its parent)."""
    global _server
    with _LOCK:
        if _server is not None:
            _kill(_server)
            _server = None


def probe_torch_file(path: str | Path, fmt: str, memory_mib: int, timeout_s: float, *,
                     sha256: str | None = None) -> ProbeResult:
    """Load ``path`` (``"torchscript"`` or ``"torch.export"``) in a forked process of the probe server.

    Fails closed: every way the probe can end other than "the forked load exited 0" comes back as a
    non-zero ``returncode`` or :class:`subprocess.TimeoutExpired`, never as a load that passed. Each request
    carries an id that its reply must echo; a request that ends any other way (a reply out of turn or
    unreadable, an exception or interrupt while waiting) kills the server, so that a late reply is never
    read as the next file's.

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
        Limit on the load (seconds), counted by the server from its fork; the server's start (its torch import)
        is bounded by :data:`~STARTUP_TIMEOUT_S`.
    sha256 : str, optional
        Hex sha256 of the bytes the caller checked: the forked process reads the file once, exits
        :data:`~faux_checks.inputs.probe.CHANGED_EXIT` when its hash differs, and loads that copy from memory.

    Returns
    -------
    ProbeResult
        ``returncode`` 0 only when the forked load exited 0; :data:`PROBE_NOT_RUN` when the probe could not run.

    Raises
    ------
    subprocess.TimeoutExpired
        The load did not finish within ``timeout_s``.
    """
    global _server
    request_id = uuid.uuid4().hex
    request = json.dumps({"id": request_id, "fmt": fmt, "path": str(path), "memory_mib": int(memory_mib),
                          "timeout_s": timeout_s, "sha256": sha256})
    with _LOCK:
        for _attempt in (0, 1):                      # a server that died (killed from outside) is started again
            if _server is None or _server.poll() is not None:
                _server = _start(STARTUP_TIMEOUT_S)
                if _server is None:
                    return ProbeResult(PROBE_NOT_RUN, f"the torch probe server did not start within "
                                       f"{STARTUP_TIMEOUT_S:g} s (it imports torch)".encode())
            server = _server
            try:
                reply = _exchange(server, request, timeout_s)
            except BaseException:                    # interrupted: its reply must never answer another request
                _kill(server)
                _server = None
                raise
            if reply is None:                        # the server ended (killed from outside): once more
                _kill(server)
                _server = None
                continue
            if reply.get("id") != request_id or reply.get("status") not in ("exit", "signal", "timeout", "error"):
                _kill(server)
                _server = None
                return ProbeResult(PROBE_NOT_RUN, f"the torch probe server answered out of turn: {reply!r:.300}"
                                   .encode())
            return _result(reply, timeout_s)
        return ProbeResult(PROBE_NOT_RUN, b"the torch probe server ended twice while loading the file")


def _exchange(server: subprocess.Popen, request: str, timeout_s: float) -> dict | None:
    """Send ``request``, read its reply (a dict; None when the server ended). A server that does not answer
    within ``timeout_s`` + :data:`~STARTUP_TIMEOUT_S` (it kills the load at ``timeout_s``
    itself; a ``torch.export`` file's first request imports torch's export modules): TimeoutExpired (the caller kills it)."""
    assert server.stdin is not None                 # started with stdin=PIPE (_start)
    try:
        server.stdin.write(request.encode() + b"\n")
        server.stdin.flush()
    except (BrokenPipeError, OSError):
        return None
    line = _readline(server, timeout_s + STARTUP_TIMEOUT_S)
    if line is None:
        raise subprocess.TimeoutExpired([str(_SCRIPT), "serve"], timeout_s)
    if not line:
        return None
    try:
        reply = json.loads(line)
    except ValueError:
        reply = {"status": "unreadable", "line": line[:300]}
    return reply if isinstance(reply, dict) else {"status": "unreadable", "line": line[:300]}


def _result(reply: dict, timeout_s: float) -> ProbeResult:
    """The :class:`ProbeResult` of a reply in turn."""
    stderr = str(reply.get("stderr") or "").encode()
    if reply["status"] == "timeout":
        raise subprocess.TimeoutExpired([str(_SCRIPT), "serve"], timeout_s)
    if reply["status"] == "signal":
        return ProbeResult(-int(reply["code"]), stderr)
    if reply["status"] == "exit":
        return ProbeResult(int(reply["code"]), stderr)
    return ProbeResult(PROBE_NOT_RUN, b"the torch probe server could not probe the file: " + stderr)
