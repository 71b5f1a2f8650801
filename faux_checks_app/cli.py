"""The ``faux-checks`` entry point (the console script ``faux_checks_app.cli:main``, and ``python -m faux_checks_app.cli``).

:func:`main` parses the command line (:mod:`faux_checks_app.parser`, whose docstring is the top of ``--help``: the
commands, the exit codes, what goes to stdout and stderr), runs the command with ``--quiet`` and ``--device`` set for
its length, and turns what it raised into the exit code: 0 passed, 1 failed the policy, 2 could not decide (any
error; commands that decide nothing say "error"), 3 a configuration error, 128 + N a signal. The commands themselves
are :mod:`faux_checks_app.check_cli`, :mod:`~faux_checks_app.gate_cli`, :mod:`~faux_checks_app.tools_cli` and
:mod:`~faux_checks_app.evidence_cli`; the process lifecycle (signals, deadlines, Prefect's temporary server)
is :mod:`faux_checks_app.lifecycle`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading

from faux_checks.errors import EXIT_CONFIGURATION, ConfigurationError, FauxChecksError

from . import lifecycle
from .console import EXIT_UNDECIDED, error, quiet, set_quiet
from .lifecycle import Stop, on_signal, started_services
from .parser import build_parser

__all__ = ["main"]


def _end_on_stop(args, stop: Stop, before) -> int:
    """Say why the command stops, stop what it started (:func:`~faux_checks_app.lifecycle.stop_started_services`);
    the exit code (128 + the signal, or 2 for a deadline)."""
    from .standing import stop_message

    error(f"faux-checks: {stop.message}; stopping. {stop_message(getattr(args, 'command', None))}")
    lifecycle.stop_started_services(before, say=error)
    return stop.code


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (0 passed, 1 failed, 2 undecided/error).

    Run as the command (``argv`` None), a SIGTERM / SIGINT / deadline ends the process at once once
    what it started is stopped (:func:`faux_checks_app.lifecycle.exit_now`, within 10 s of the signal), and a
    Prefect flow command (:data:`FLOW_COMMANDS`) that ends normally ends the process once its exit handlers ran
    (:func:`faux_checks_app.lifecycle.finish_now`: no interpreter teardown).
    """
    args = build_parser().parse_args(argv)
    code = _run(args, argv)
    if argv is None and getattr(args, "command", None) in FLOW_COMMANDS:
        lifecycle.finish_now(code)
    return code


#: The commands whose normal end skips the interpreter's teardown when run as the console script: they load torch,
#: MLflow, Prefect and Great Expectations, whose module teardown took 9 s after the imports alone (2-core machine at
#: load 10; 0.2 s with :func:`faux_checks_app.lifecycle.finish_now`).
FLOW_COMMANDS = frozenset({"demo", "gate", "audit"})


def _run(args, argv: list[str] | None) -> int:
    """Run the parsed command; its exit code (what :func:`main` documents)."""
    set_quiet(getattr(args, "quiet", False))
    restore = _quiet_libraries() if quiet() else None
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    before, stopped = started_services(), False
    lifecycle.forget_stops()
    try:
        with _device_setting(args):
            code = args.func(args)
        if lifecycle.raised_stop() is not None:   # a signal whose exception a library caught and dropped
            stopped = _end_on_stop(args, lifecycle.raised_stop(), before)
            return stopped
        return code
    except Stop as stop:
        stopped = _end_on_stop(args, stop, before)
        return stopped
    except ConfigurationError as exc:  # found before anything was recorded: its own code, one line
        error(f"faux-checks {args.command}: configuration error: {exc}")
        return EXIT_CONFIGURATION
    except FauxChecksError as exc:  # commands that decide nothing (spec, register, history, report) say "error"
        error(f"faux-checks: could not decide: {exc}" if _decides(args) else f"faux-checks {args.command}: error: {exc}")
        return EXIT_UNDECIDED
    except KeyboardInterrupt:
        error("faux-checks: interrupted; nothing was decided")
        return 130
    except Exception as exc:  # noqa: BLE001 - fail closed on anything unexpected
        if lifecycle.raised_stop() is not None:   # a Stop a library caught and re-raised as its own error
            stopped = _end_on_stop(args, lifecycle.raised_stop(), before)
            return stopped
        error(f"faux-checks: internal error, could not decide: {type(exc).__name__}: {exc}" if _decides(args) else
              f"faux-checks {args.command}: internal error: {type(exc).__name__}: {exc}")
        return EXIT_UNDECIDED
    finally:
        try:   # never unbounded; a signal during this flush ends the command as any other does
            dropped = lifecycle.flush_prefect(lifecycle.AFTER_STOP_FLUSH_S if stopped is not False else 5.0)
        except Stop as stop:
            dropped, stopped = 0, stop.code
        if dropped:
            error(f"faux-checks: {dropped} Prefect event(s)/log line(s) not sent: the Prefect API did not answer")
        set_quiet(False)
        for sig, previous in handlers.items():
            signal.signal(sig, previous)
        if restore is not None:
            restore()
        if stopped is not False and argv is None:   # the command itself (not a caller's main([...])): a bounded exit
            lifecycle.exit_now(stopped)


def _decides(args) -> bool:
    """Whether the command makes a decision (check, gate, audit, demo, score-large); its errors read "could not decide"."""
    return getattr(args, "decides", True)


@contextlib.contextmanager
def _device_setting(args):
    """``--device`` for this command: ``$FAUX_CHECKS_DEVICE`` while it runs (the flows run in this process), then restored.

    Checked first, so that ``--device cuda`` on a machine without CUDA exits 2 before anything is read or trained.
    """
    device = getattr(args, "device", None)
    if device is None:
        yield
        return
    from faux_checks._device import DEVICE_ENV, resolve_device

    previous = os.environ.get(DEVICE_ENV)
    os.environ[DEVICE_ENV] = device
    try:
        resolve_device(device)
        yield
    finally:
        if previous is None:
            os.environ.pop(DEVICE_ENV, None)
        else:
            os.environ[DEVICE_ENV] = previous


def _quiet_libraries():
    """``--quiet``: library log records below WARNING are dropped (Prefect, GX, MLflow, alembic); returns the undo."""
    previous_disable = logging.root.manager.disable
    previous_env = {k: os.environ.get(k) for k in ("PREFECT_LOGGING_LEVEL", "MLFLOW_LOGGING_LEVEL")}
    os.environ.update({"PREFECT_LOGGING_LEVEL": "WARNING", "MLFLOW_LOGGING_LEVEL": "WARNING"})
    logging.disable(logging.INFO)

    def restore():
        logging.disable(previous_disable)
        for key, value in previous_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return restore


if __name__ == "__main__":
    sys.exit(main())
