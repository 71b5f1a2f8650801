"""A command's face on the terminal: the lines it prints (the result on stdout; progress and errors on stderr,
progress left out with ``--quiet``), whether it prints ``--json`` instead, and the exit codes it returns.

Every command module prints through here; :func:`faux_checks_app.cli.main` sets ``--quiet`` for the length of one
command (:func:`set_quiet`). What ``--json`` prints is :mod:`faux_checks_app.output`.
"""

from __future__ import annotations

import sys

from faux_checks.gate.decision import exit_code_for

__all__ = ["EXIT_FAILED", "EXIT_PASSED", "EXIT_UNDECIDED", "eprint", "error", "quiet", "say", "set_quiet",
           "wants_json"]

EXIT_PASSED, EXIT_FAILED, EXIT_UNDECIDED = (exit_code_for(d) for d in ("passed", "failed", "undecided"))

_QUIET = False


def set_quiet(flag: bool) -> None:
    """``--quiet`` on (True) or off (False) for the command that runs now: :func:`eprint` prints nothing while on."""
    global _QUIET
    _QUIET = bool(flag)


def quiet() -> bool:
    """Whether ``--quiet`` is on (no progress lines, no progress bars)."""
    return _QUIET


def say(text) -> None:
    """One line of the result on stdout; control characters from data (a column name, a group, a report's
    field) written as escapes (:func:`faux_checks_app.output.terminal_text`), line breaks included."""
    from .output import terminal_text

    print(terminal_text(text))


def eprint(*args) -> None:
    """Progress on stderr (left out with ``--quiet``); control characters escaped, our line breaks kept."""
    if not _QUIET:
        error(*args)


def error(*args) -> None:
    """An error on stderr, always; control characters escaped, our line breaks kept."""
    from .output import terminal_text

    print(*(terminal_text(a, keep_newlines=True) for a in args), file=sys.stderr, flush=True)


def wants_json(args) -> bool:
    """Whether the command was given ``--json`` (``args``: its parsed arguments; False for commands without it)."""
    return bool(getattr(args, "json", False))
