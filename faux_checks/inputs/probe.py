"""The probe: a model file is loaded first by its library in a child process limited in memory and time.

:func:`probe_load` runs after the structural checks of :mod:`faux_checks.inputs.limits`. LightGBM, XGBoost, ONNX
and skops files are loaded by their library in a child process (``_probe_child.py``) whose address space is
limited (``resource.setrlimit(RLIMIT_AS)``, ``probe_memory_mb``, or the runner's own lower ``ulimit -v``) and
whose load is limited in time (``probe_timeout_s``). It fails closed: only a load that exited 0 passes; a
loader that aborts, is killed, runs out of memory or out of time, and a probe that cannot run at all, is
refused with that cause, and the gate (which then records the version ``undecided``) goes on.

TorchScript and ``torch.export`` files are probed too where ``probe_torch`` is set: in the gate's run
(:func:`faux_checks_flows.gate._operations`), where a crash would end the whole gate. Measured: a
1,937-byte TorchScript archive whose ``code/`` nests 200,000 parentheses passes
:func:`~faux_checks.inputs.limits.check_archive` (400 KB unpacked) and kills ``torch.jit.load`` with ``SIGSEGV``
(the C++ parser recurses), so the structural checks alone cannot promise a torch load never crashes. Torch
files are probed by the probe server of :mod:`faux_checks.inputs.torch_probe` (torch imported once, each load
forked), from the bytes the caller checked (their sha256: a file swapped after the checks is refused, never
loaded); ``check`` and ``register`` load in-process (a crash there ends that one command with a signal and
records nothing), and a file that passed once is not probed again in the same process (:func:`probe_load`
remembers its sha256).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..errors import InputError
from ..provenance import file_sha256
from .limits import ModelLimits, model_limits
from .torch_probe import PROBE_NOT_RUN, STARTUP_TIMEOUT_S

if TYPE_CHECKING:                                   # imported when a torch file is probed (probe_load)
    from .torch_probe import ProbeResult

__all__ = ["CHANGED_EXIT", "LoaderRaisedError", "MIN_PROBE_MIB", "PROBED_FORMATS", "PROBED_TORCH_FORMATS",
           "inherited_memory_limit_mib", "probe_load"]

#: Formats whose loader is a native library loaded first in the probe process.
PROBED_FORMATS = ("lightgbm", "xgboost", "onnx", "skops")
#: torch formats, probed only where ``ModelLimits.probe_torch`` is set (the gate).
PROBED_TORCH_FORMATS = ("torchscript", "torch.export")
_PROBE_SCRIPT = Path(__file__).with_name("_probe_child.py")
#: Exit code of a torch probe whose file no longer has the sha256 it was given (``_probe_child.CHANGED_EXIT``).
CHANGED_EXIT = 4
#: Least address space (MiB) a probe process can load a model file in (the policy's lowest ``probe_memory_mb``).
MIN_PROBE_MIB = 256
_LABEL = {"lightgbm": "LightGBM", "xgboost": "XGBoost", "onnx": "ONNX", "skops": "skops", "torchscript": "TorchScript",
          "torch.export": "torch.export"}
#: (format, sha256, trusted types, memory MiB, time limit) of files whose probe load succeeded in this process.
_PASSED: set[tuple] = set()


class LoaderRaisedError(InputError):
    """The model's library raised a Python error on the file in the probe process (exit 3).

    :func:`~faux_checks.inputs.models.load_model` then asks this process's loader for its own words on the file
    (it raises them); a file that loads here all the same is refused with this error: the probe's verdict stands.
    """


def inherited_memory_limit_mib() -> int | None:
    """This process's address-space limit (``RLIMIT_AS`` soft limit, as ``ulimit -v`` sets it) in MiB; None: unlimited.

    A probe process inherits it and can only lower it (:func:`probe_load`).
    """
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft) >> 20


def _probe_memory(path, limits: ModelLimits) -> tuple[int, str]:
    """The probe's address-space limit (MiB: ``probe_memory_mb``, or the runner's lower limit) and its wording.

    Raises
    ------
    InputError
        The runner's limit is under :data:`MIN_PROBE_MIB`: nothing can be probed under it (the runner, not the file).
    """
    runner = inherited_memory_limit_mib()
    if runner is None or runner >= limits.probe_memory_mb:
        return int(limits.probe_memory_mb), f"{limits.probe_memory_mb:,} MiB"
    if runner < MIN_PROBE_MIB:
        raise InputError(
            f"cannot check {path}: this process runs under an address-space limit of {runner:,} MiB (RLIMIT_AS, as "
            f"`ulimit -v` or the service manager sets it), below the {MIN_PROBE_MIB} MiB a probe process needs to load "
            f"a model file at all ([operations] probe_memory_mb asks {limits.probe_memory_mb:,} MiB). The limit is the "
            "runner's, not the file's: raise it (`ulimit -v unlimited`, or at least probe_memory_mb) and run again")
    return runner, (f"{runner:,} MiB (the runner's own address-space limit, RLIMIT_AS / `ulimit -v`, below [operations] "
                    f"probe_memory_mb = {limits.probe_memory_mb:,} MiB)")


def probe_load(path: str | Path, fmt: str, *, trusted_types: Sequence[str] = (),
               limits: ModelLimits | None = None, sha256: str | None = None) -> None:
    """Load ``path`` with its library in a child process limited in memory and time; raise unless that load exited 0.

    The child (``_probe_child.py``, run by path: it imports the model's library only, not this package)
    sets ``RLIMIT_AS`` to ``probe_memory_mb`` (or to the limit this process inherited, where that is lower:
    a process can lower its limit, never raise it), imports the library, then loads the file under a
    ``probe_timeout_s`` timer; the interpreter's start and the library's import are bounded apart by
    :data:`STARTUP_TIMEOUT_S` (the file plays no part in them). Probed: :data:`PROBED_FORMATS`, and
    :data:`PROBED_TORCH_FORMATS` where ``limits.probe_torch`` is set (a ``torch.export`` file must have passed
    :func:`~faux_checks.inputs.export_archive.check_export_archive` first: the child loads it with
    ``weights_only`` forced, never with torch's fallback).

    Fails closed: only a load that exited 0 passes. A file whose probe exited 0 is remembered by its
    sha256 (with the format, trusted types and both limits) and not probed again in this process: the gate
    loads one version's file several times.

    A torch file is loaded by the probe from the bytes whose sha256 is ``sha256`` (the caller's checked copy;
    default the file's hash when the probe starts): the child reads the file once, compares its hash, and loads
    from that copy in memory, so a file swapped after the caller's checks is never loaded.

    Raises
    ------
    LoaderRaisedError
        The library raised a Python error on the file (its type and message).
    InputError
        The loader was killed by a signal (``SIGABRT``, ``SIGSEGV``, ``SIGKILL``), ran out of the memory limit,
        or did not finish within ``probe_timeout_s``; or the probe could not run at all (the limit could not be
        set, the library did not import, the torch probe server did not start or answered out of turn), or
        the runner's own address-space limit is under :data:`MIN_PROBE_MIB`; or the file's bytes are no longer
        those of ``sha256`` (the probe exited :data:`CHANGED_EXIT`). Nothing of the load reached this process.
    """
    limits = limits or model_limits()
    if not limits.probe or not (fmt in PROBED_FORMATS or (limits.probe_torch and fmt in PROBED_TORCH_FORMATS)):
        return
    memory_mib, memory_text = _probe_memory(path, limits)
    key = (fmt, sha256 or file_sha256(path), tuple(trusted_types), memory_mib, float(limits.probe_timeout_s))
    if key in _PASSED:
        return
    bound = f"a probe process limited to {memory_text} and {limits.probe_timeout_s:g} s"
    label = _LABEL.get(fmt, fmt)
    done: ProbeResult | subprocess.CompletedProcess[bytes]
    try:
        if fmt in PROBED_TORCH_FORMATS:     # torch imported once per process, each load forked (torch_probe.py)
            from .torch_probe import probe_torch_file

            done = probe_torch_file(path, fmt, memory_mib, limits.probe_timeout_s, sha256=key[1])
        else:
            command = [sys.executable, str(_PROBE_SCRIPT), fmt, str(path), str(memory_mib),
                       json.dumps(list(trusted_types)), repr(float(limits.probe_timeout_s))]
            done = subprocess.run(command, capture_output=True, timeout=STARTUP_TIMEOUT_S + limits.probe_timeout_s,
                                  stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        done = subprocess.CompletedProcess([], -signal.SIGALRM, b"", b"")
    if done.returncode == 0:
        _PASSED.add(key)
        return
    if fmt in PROBED_TORCH_FORMATS and done.returncode == CHANGED_EXIT:
        raise InputError(f"refused to load {path}: the file changed after it was checked (its bytes no longer have "
                         f"the sha256 {key[1][:16]}… of the copy checked); the changed file was not loaded")
    raise _refusal(path, label, done.returncode, done.stderr, bound, memory_text != f"{limits.probe_memory_mb:,} MiB")


def _refusal(path, label: str, code: int, stderr: bytes, bound: str, capped: bool) -> InputError:
    """The error of a probe that did not exit 0 (``code``: as :mod:`subprocess` gives it; ``capped``: the
    runner's own address-space limit stood in for ``probe_memory_mb``)."""
    tail = _last_line(stderr)
    said = f": {tail}" if tail else ""
    runner = (" The runner's address-space limit, lower than the policy's, may be the cause: raise it (`ulimit -v`) "
              "to decide this file." if capped else "")
    if code == -signal.SIGALRM:
        return InputError(f"refused to load {path}: the {label} loader did not finish in {bound} ([operations] "
                          "probe_timeout_s); the file was not loaded by the gate, and a gate records the version "
                          "undecided")
    if code == PROBE_NOT_RUN:
        return InputError(f"refused to load {path}: the probe process could not run the {label} loader ({bound}){said}; "
                          "the cause is the machine or the runner, not the file, and the file was not loaded by the "
                          f"gate (a gate records the version undecided: run it again once the cause is fixed).{runner}")
    if code == 3 and not _out_of_memory(stderr):
        return LoaderRaisedError(f"refused to load {path}: the {label} loader raised an error in {bound}{said}")
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    elif _out_of_memory(stderr):
        how = "ran out of memory"
    else:
        how = f"exited with code {code}"
    return InputError(f"refused to load {path}: the {label} loader {how} in {bound} ([operations] probe_memory_mb, "
                      f"probe_timeout_s){said}; "
                      + ("not loaded by the gate." + runner if capped else
                         "a damaged or hostile model file, not loaded by the gate"))



def _out_of_memory(stderr: bytes) -> bool:
    text = stderr.decode("utf-8", "replace")
    return any(m in text for m in ("MemoryError", "bad_alloc", "out of memory", "Cannot allocate memory"))


def _last_line(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""
