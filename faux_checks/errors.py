"""Exception hierarchy of faux-checks.

Every error raised for user input is an :class:`InputError`; the CLI maps both
:class:`InputError` and :class:`UndecidableError` to exit code 2 ("could not decide"), so a
gate that cannot decide never passes (docs/architecture.md, "Contracts").

A :class:`ConfigurationError` is the one exception: the gate's inputs (policy, data columns,
feature spec width, model name) do not fit together, found before any version is claimed, so
nothing is recorded; ``faux-checks gate``, ``audit`` and ``check`` exit :data:`EXIT_CONFIGURATION` (3), which a CI job
can tell apart from 2 = "ran, not enough evidence" (docs/ci.md).
"""

from __future__ import annotations

__all__ = ["EXIT_CONFIGURATION", "ConfigurationError", "FauxChecksError", "InputError", "RegistryUnreachableError", "UndecidableError", "UnsafeModelError"]


class FauxChecksError(Exception):
    """Base class of every error raised on purpose by faux-checks."""


class InputError(FauxChecksError, ValueError):
    """The data, model or settings a user gave cannot be used as they are.

    The message says what was found, what was expected and how to fix it, with column names
    and row counts.
    """


#: Exit code of a configuration error (``faux-checks gate``): nothing was recorded; fix the inputs and rerun.
EXIT_CONFIGURATION = 3


class ConfigurationError(InputError):
    """The gate's configuration does not fit its inputs; raised before the registry records anything.

    Examples: a policy column (protected attribute, label, admissible or linked column) missing
    from the audit data, a version's feature spec that needs columns the data lacks or encodes to
    a width its model does not take, an unknown registered model. The message is one line: the
    column (or version), the counts, the fix. The CLI exits :data:`EXIT_CONFIGURATION` (3).
    """


class UndecidableError(FauxChecksError):
    """The check ran but its result cannot support a decision (e.g. aux model too weak)."""


class UnsafeModelError(InputError):
    """A model file would need unpickling arbitrary Python objects to load; refused by default."""


class RegistryUnreachableError(UndecidableError):
    """The model registry (MLflow tracking server) did not answer within the client's timeouts and retries."""
