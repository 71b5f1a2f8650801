"""Exception hierarchy of faux-checks.

Every error raised for user input is an :class:`InputError`; the CLI maps both
:class:`InputError` and :class:`UndecidableError` to exit code 2 ("could not decide"), so a
gate that cannot decide never passes (docs/architecture.md, "Contracts").
"""

from __future__ import annotations

__all__ = ["FauxChecksError", "InputError", "RegistryUnreachableError", "UndecidableError", "UnsafeModelError"]


class FauxChecksError(Exception):
    """Base class of every error raised on purpose by faux-checks."""


class InputError(FauxChecksError, ValueError):
    """The data, model or settings a user gave cannot be used as they are.

    The message says what was found, what was expected and how to fix it, with column names
    and row counts.
    """


class UndecidableError(FauxChecksError):
    """The check ran but its result cannot support a decision (e.g. aux model too weak)."""


class UnsafeModelError(InputError):
    """A model file would need unpickling arbitrary Python objects to load; refused by default."""


class RegistryUnreachableError(UndecidableError):
    """The model registry (MLflow tracking server) did not answer within the client's timeouts and retries."""
