"""What the commands take from their parsed arguments before anything runs: the policy with the command line's
overrides on top (:func:`command_policy`), its name in messages (:func:`policy_name`), the output paths, checked
writable before anything is read or scored (:func:`check_outputs`), and ``--deadline`` (:func:`deadline_seconds`).
"""

from __future__ import annotations

import math

from faux_checks.errors import ConfigurationError, FauxChecksError

__all__ = ["check_outputs", "command_policy", "deadline_seconds", "policy_name", "protected_file_policy"]


def deadline_seconds(text: str | None, *, nothing: str = "nothing was run") -> float | None:
    """``--deadline`` (``check``, ``gate``) as seconds, in the range of the policy's ``[operations] deadline_s``.

    The range, greater than 0 and at most 86,400 s (24 h), is read from
    :class:`faux_checks.gate.policy.OperationsSettings` (pydantic ``gt``/``le``), so the option and the policy key
    accept the same values.

    Returns
    -------
    float or None
        None when the option was not given (the policy's ``deadline_s`` applies).

    Raises
    ------
    ConfigurationError
        Not a number, NaN, infinite, 0 or less, or above the limit (exit 3; the option, the value and the range named).
    """
    if text is None:
        return None
    from faux_checks.gate.policy import OperationsSettings

    bounds = {type(m).__name__: m for m in OperationsSettings.model_fields["deadline_s"].metadata}
    low, high = float(bounds["Gt"].gt), float(bounds["Le"].le)
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and low < value <= high):
        raise ConfigurationError(
            f"--deadline {text!r} is not a deadline: give the seconds the command may run, a number greater than "
            f"{low:g} and at most {high:,.0f} ({high / 3600:g} h; the range of the policy's [operations] "
            f"deadline_s), e.g. --deadline 600; {nothing}")
    return value


def command_policy(args):
    """The policy a file command (``check``, ``score-large``) runs under: ``--policy`` (the shipped one when absent) with
    the command line's ``--protected``, ``--label``, ``--positive-label`` and ``--output-form`` on top.

    Raises
    ------
    FauxChecksError
        ``--protected`` with a policy that declares several attributes (``[[attributes]]``), or neither
        ``--protected`` nor ``--policy`` where the command takes ``--protected``; a policy that does not load
        (:func:`faux_checks.gate.policy.load_policy`).
    """
    from faux_checks.gate.policy import load_policy

    protected = getattr(args, "protected", None)
    if protected is not None and args.policy is not None:
        given = load_policy(args.policy)
        if given.protected is None:     # written with [[attributes]]
            declared = given.attributes
            raise FauxChecksError(
                f"--protected {protected}: the policy {args.policy} declares several protected attributes "
                f"({', '.join(a.column for a in declared)}); `check` and `gate` check every one of them without "
                "--protected; for one attribute give a policy with protected = \"COLUMN\"")
    if protected is None and hasattr(args, "protected") and args.policy is None:
        raise FauxChecksError("--protected is required with the shipped policy (or give --policy with protected = "
                              "\"COLUMN\" or [[attributes]])")
    overrides = {"protected": protected, "label": getattr(args, "label", None),
                 "positive_label": getattr(args, "positive_label", None)}
    if getattr(args, "output_form", None):
        overrides["target_output"] = args.output_form
    policy = load_policy(args.policy, **overrides)
    policy = protected_file_policy(policy, getattr(args, "protected_file", None), getattr(args, "join_on", None))
    if args.policy is None and getattr(args, "label", None) is None and policy.label is not None:
        # the shipped default names the demo's label column; a user's data need not have it
        policy = policy.with_overrides(label=None)
    return policy


def protected_file_policy(policy, path: str | None, join_on: str | None):
    """The policy with ``--protected-file`` / ``--join-on`` on its ``[protected_file]`` section (the section's other
    keys kept; ``unmatched`` defaults to refuse).

    Raises
    ------
    ConfigurationError
        ``--protected-file`` without ``--join-on`` (or the reverse) where the policy has no ``[protected_file]``.
    """
    if path is None and join_on is None:
        return policy
    given = policy.protected_file.model_dump() if policy.protected_file is not None else {}
    section = {**given, **{k: v for k, v in (("path", path), ("join_on", join_on)) if v is not None}}
    if not section.get("path") or not section.get("join_on"):
        missing = "--join-on KEY" if not section.get("join_on") else "--protected-file PATH"
        raise ConfigurationError(f"the protected file needs both its path and its key column: add {missing} (or set "
                                 "[protected_file] path and join_on in the policy); nothing was written")
    return policy.with_overrides(protected_file=section)


def check_outputs(*, scores_out=None, report_dir=None, out=None, work_dir=None) -> None:
    """Refuse output paths that cannot be written before anything is loaded or scored (InputError, exit 2)."""
    from faux_checks.inputs.io import check_output_path

    for path, option, folder in ((scores_out, "--scores-out", False), (out, "--out", False),
                                 (report_dir, "--report-dir", True), (work_dir, "--work-dir", True)):
        if path is not None:
            check_output_path(path, option=option, folder=folder)


def policy_name(args) -> str:
    """The policy a command was given, as its messages name it: ``the policy PATH`` or the shipped one."""
    return f"the policy {args.policy}" if args.policy else "the shipped policy (no --policy given)"
