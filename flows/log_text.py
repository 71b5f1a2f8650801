"""Run-log text that cannot drive a terminal: control codes and bidi characters escaped.

Model names, column names, group values and the reasons that quote them reach the flows' Prefect
run logs (``logger.info("%s v%s: %s", model_name, ...)``), which Prefect prints to the terminal and
stores for its UI. A name holding ``"\\x1b[32mpassed\\x1b[0m"`` would redraw a line there; a
``\\u202e`` would reverse it. :class:`EscapingFilter` rewrites each record the run loggers create,
with :func:`faux_checks.report._format.printable`, the function the terminal output uses.
"""

from __future__ import annotations

import logging

from faux_checks.report._format import printable

__all__ = ["EscapingFilter", "RUN_LOGGERS", "install"]

#: The loggers behind Prefect's ``get_run_logger()`` (flow runs, task runs).
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


class EscapingFilter(logging.Filter):
    """Escape control characters (``\\x1b``, ``\\r``, ``\\u202e``, ...) in a record's args and formatted message.

    String args are escaped whole (a newline in a name is written ``\\n``: it cannot start a fake
    log line); then the formatted message is escaped keeping its own newlines, which catches
    other args (exceptions, lists of names) whose ``str`` holds control characters. The record
    leaves with ``msg`` the escaped text and no ``args``; it is never dropped (returns True).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_faux_escaped", False):
            return True
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(printable(a) if isinstance(a, str) else a for a in args)
        elif isinstance(args, dict):
            record.args = {k: printable(v) if isinstance(v, str) else v for k, v in args.items()}
        try:
            message = record.getMessage()
        except Exception:                  # noqa: BLE001 - a format error: leave it to logging's own handling
            record.args = args
            return True
        record.msg, record.args = printable(message, keep_newlines=True), None
        record._faux_escaped = True
        return True


def install(logger: logging.Logger | logging.LoggerAdapter) -> logging.Logger | logging.LoggerAdapter:
    """Attach one :class:`EscapingFilter` to ``logger`` (or the logger under an adapter); idempotent; returns it."""
    base = logger.logger if isinstance(logger, logging.LoggerAdapter) else logger
    if isinstance(base, logging.Logger) and not any(isinstance(f, EscapingFilter) for f in base.filters):
        base.addFilter(EscapingFilter())
    return logger
