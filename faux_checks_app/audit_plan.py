"""``faux-checks audit`` before the flow: its configuration checked, nothing recorded, no Prefect.

The same checks as the gate's (:mod:`faux_checks_app.gate_plan`): the policy loads, the model is
registered, the current batch can be read and has every column the policy names, and the deployed
version's feature spec and model take its width (probed on its first 256 rows; errors of the encoding
itself, such as too few rows or missing values, are left to the audit, which records them undecided). Each failure is one
:class:`~faux_checks.errors.ConfigurationError` line (exit 3). A model with no version holding the
alias is left to the flow, which reports it undecided (there is nothing deployed to audit).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from faux_checks.errors import ConfigurationError, InputError

__all__ = ["prepare_audit_run"]


def prepare_audit_run(args, tracking_uri: str | None) -> None:
    """Check the configuration of ``faux-checks audit``; raise before anything is recorded.

    Parameters
    ----------
    args : argparse.Namespace
        The audit command's options (``model_name``, ``data``, ``policy``, ``alias``, ``sep``, ``thousands``, ``positive_label``).
    tracking_uri : str or None
        The registry.

    Raises
    ------
    ConfigurationError
        ``--policy`` does not load; no registered model of that name (the existing ones listed); the batch cannot
        be read or lacks a column of the policy (the policy given, else the one the gate recorded for the
        deployed version, else the shipped one); the deployed version's spec or model does not take the batch; the
        policy gives c as probabilities (``[protected_probabilities]``: the drift audit does not impute it).
    """
    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.preflight import check_policy_columns, check_version_fits
    from faux_checks.inputs.io import read_table
    from faux_checks.registry import Registry

    from .output import library_output_to_stderr

    positive_label = getattr(args, "positive_label", None)
    policy = None
    if args.policy:
        try:
            policy = load_policy(args.policy, positive_label=positive_label)
        except (InputError, ValueError, OSError) as exc:
            raise ConfigurationError(f"the policy {args.policy}: {exc}; nothing was recorded") from None
    registry = Registry(tracking_uri)
    with library_output_to_stderr():
        try:
            rows = {r["version"]: r for r in registry.history(args.model_name)}
        except InputError as exc:   # no such registered model: the message lists the existing ones
            raise ConfigurationError(f"{exc}; nothing was recorded") from None
        version = registry.alias_version(args.model_name, args.alias)
    if version is None or version not in rows:
        return                      # nothing deployed: the flow says so (undecided)
    policy_name = f"the policy {args.policy}"
    if policy is None:
        policy, policy_name = _recorded_or_shipped(rows[version], positive_label)
    if policy.protected_probabilities is not None:
        raise ConfigurationError(f"{policy_name} gives the protected attribute as probabilities "
                                 "([protected_probabilities]), which the drift audit does not impute (it compares each "
                                 "person's score across two batches, and each draw of c would move them): give --policy "
                                 "with protected = \"COLUMN\" on batches that hold c, or re-gate the batch with "
                                 "`faux-checks gate`, which imputes it; nothing was recorded")
    try:
        frame = read_table(args.data, sep=getattr(args, "sep", None), thousands=getattr(args, "thousands", None),
                       decimal=getattr(args, "decimal", None))
    except (InputError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise ConfigurationError(f"--data {args.data}: {exc}; nothing was recorded") from None
    except Exception:   # noqa: BLE001 - I/O trouble, not configuration: the flow reads it again and records the cause
        return
    check_policy_columns(frame, policy, data_name=str(args.data), policy_name=policy_name)
    with tempfile.TemporaryDirectory(prefix="faux-preflight-") as tmp, library_output_to_stderr():
        try:
            model_path, spec_path = registry.download(args.model_name, version, Path(tmp) / f"v{version}")
        except Exception:   # noqa: BLE001 - the version's own download trouble: the flow retries it and records the cause
            return
        # probed on the batch's head; an error of the encoding itself (too few rows, missing values) is the
        # audit's to record (undecided), not configuration
        check_version_fits(args.model_name, version, model_path, spec_path, frame.head(256), policy,
                           encoding_is_configuration=False)


def _recorded_or_shipped(row: dict, positive_label: str | None):
    """The policy the gate recorded in the deployed version's report (as the flow reads it), else the shipped one."""
    from faux_checks.gate.policy import load_policy, recorded_policy

    from faux_checks.registry.records import REPORT_TAG, parse_text

    report = parse_text(row.get(REPORT_TAG))
    try:
        payload = json.loads(Path(report).with_name("report.json").read_text()) if report else {}
        recorded = payload.get("policy") or ((payload.get("check") or {}).get("provenance") or {}).get("policy")
    except (OSError, ValueError):
        recorded = None
    if recorded:
        try:
            policy = recorded_policy(json.dumps(recorded))
            if positive_label is not None:
                policy = policy.with_overrides(positive_label=positive_label)
            return policy, f"the policy the gate recorded for v{row['version']} (no --policy given)"
        except (InputError, ValueError):
            pass
    return load_policy(None, positive_label=positive_label), "the shipped policy (no --policy given)"
