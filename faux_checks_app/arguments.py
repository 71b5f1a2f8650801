"""What the commands take from their parsed arguments before anything runs: the policy with the command line's
overrides on top (:func:`command_policy`), its name in messages (:func:`policy_name`), and the output paths, checked
writable before anything is read or scored (:func:`check_outputs`).
"""

from __future__ import annotations

from faux_checks.errors import FauxChecksError

__all__ = ["check_outputs", "command_policy", "policy_name"]


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
        if given.reports_per_attribute:
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
    if args.policy is None and getattr(args, "label", None) is None and policy.label is not None:
        # the shipped default names the demo's label column; a user's data need not have it
        policy = policy.with_overrides(label=None)
    return policy


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
