"""The policy file a flow command runs under when a CLI option overrides a policy key (``--positive-label``).

The gate flow reads its policy from a path (every task loads it again, and records the file as the run's
``policy`` artifact), so an override given on the command line becomes a copy of the user's policy TOML, in
a temporary folder, with the key set on top. The user's file is never modified; the recorded copy is the
policy that decided, and its hash is the hash of ``load_policy(path, positive_label=...)``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from faux_checks.errors import ConfigurationError, InputError

__all__ = ["policy_with_positive_label"]

_TOP_KEY = re.compile(r"^\s*positive_label\s*=")


def policy_with_positive_label(policy_path: str | None, positive_label: str, folder: Path) -> Path:
    """Write the policy at ``policy_path`` (the shipped default when None) with ``positive_label`` set; return the copy.

    Parameters
    ----------
    policy_path : str or None
        The user's policy TOML (read, never written).
    positive_label : str
        The ``--positive-label`` value; it replaces a top-level ``positive_label`` of the file.
    folder : Path
        Existing folder for the copy (a temporary folder that outlives the command's flow).

    Returns
    -------
    Path
        ``folder / <the policy's file name>``: the user's text, its own top-level ``positive_label`` line
        left out, with ``positive_label = "..."`` as its first line.

    Raises
    ------
    ConfigurationError
        The policy does not load, or the copy does not read back as the policy with the override (a
        layout this line-based edit cannot handle); nothing was recorded.
    """
    from faux_checks.gate.policy import default_policy_path, load_policy

    source = Path(policy_path) if policy_path else default_policy_path()
    name = f"the policy {policy_path}" if policy_path else "the shipped policy (no --policy given)"
    try:
        expected = load_policy(source, positive_label=positive_label)
    except InputError as exc:
        raise ConfigurationError(f"{name}: {exc}; nothing was recorded") from None
    kept, top = [], True
    for line in source.read_text().splitlines():
        if line.lstrip().startswith("["):
            top = False                      # the first table header ends the top-level keys
        if top and _TOP_KEY.match(line):
            continue
        kept.append(line)
    copy = Path(folder) / source.name
    copy.write_text(f"positive_label = {json.dumps(str(positive_label))}   # --positive-label\n" + "\n".join(kept) + "\n")
    try:
        same = load_policy(copy) == expected
    except InputError:
        same = False
    if not same:
        raise ConfigurationError(f"--positive-label {positive_label!r}: {name} could not be copied with it set (its "
                                 "top-level keys are laid out in a way this edit does not read); put positive_label = "
                                 f"{json.dumps(str(positive_label))} in the policy file instead; nothing was recorded")
    return copy
