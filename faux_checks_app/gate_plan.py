"""``faux-checks gate`` before the flow: configuration checked, versions planned, nothing recorded.

:func:`read_gate_inputs` loads the policy and the audit data and judges them together without the registry
(the policy's columns, the label, the protected attributes, missing values, group sizes and rows needed:
:mod:`faux_checks.gate.preflight_data`); :func:`prepare_gate` then asks the registry which versions to gate (new ones, and undecided ones whose check never
ran once the policy or data changed: :meth:`~faux_checks.registry.Registry.gate_plan`), and
checks each such version's feature spec and model against the data. It reads the registry and
downloads files but claims, leases or tags nothing, and imports neither Prefect nor Great
Expectations: a configuration error costs seconds, records nothing and exits 3
(:data:`faux_checks.errors.EXIT_CONFIGURATION`); a run with nothing to gate starts no Prefect server.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from faux_checks.errors import ConfigurationError, InputError

__all__ = ["GateInputs", "GatePlan", "prepare_gate", "read_gate_inputs", "skipped_objects"]


@dataclass
class GatePlan:
    """What this gate run will do: ``todo`` (new versions), ``regate`` (undecided, re-gated), ``rows`` (every version)."""

    todo: list[str] = field(default_factory=list)
    regate: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)

    @property
    def skipped(self) -> list[dict]:
        """Versions recorded undecided that this run leaves alone, each with its ``reason``."""
        return [r for r in self.rows if r["action"] == "skip"]

    @property
    def all_undecided(self) -> bool:
        """Every registered version is recorded undecided and none is gated now: nothing can be deployed."""
        return bool(self.rows) and not self.todo and not self.regate and all(
            r.get("decision") == "undecided" for r in self.rows)


@dataclass
class GateInputs:
    """The policy and the audit data of a gate run, judged without the registry (:func:`read_gate_inputs`).

    ``frame`` and ``findings`` are None when the data could not be read for a reason that is not configuration
    (I/O trouble: the flow reads it again, with retries, and records the cause). ``rows`` are the rows the preflight
    judged: ``frame`` itself, or with ``[protected_probabilities]`` c's first draw in place of the probability
    columns (the flow gates ``frame``: each draw of c is the check's, :func:`faux_checks.gate.estimated.check_estimated`).
    """

    policy: object
    policy_name: str
    frame: object = None
    findings: object = None
    rows: object = None


def read_gate_inputs(args) -> GateInputs:
    """Load the policy and the audit data and judge them together, before the registry is asked anything.

    The data is read once; :func:`faux_checks.gate.preflight.check_policy_columns` and
    :func:`faux_checks.gate.preflight_data.inspect_data` run on it (seconds), so a label, protected attribute or
    column that stops every version is found before any model is downloaded or Prefect is started.

    Raises
    ------
    ConfigurationError
        The policy does not load, the data cannot be read, lacks a policy column, or does not fit the policy
        (:func:`faux_checks.gate.preflight_data.check_data`: every offending column named).
    """
    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.preflight import check_policy_columns
    from faux_checks.gate.preflight_data import check_data, inspect_data
    from faux_checks.inputs.io import read_table

    policy_name = f"the policy {args.policy}" if args.policy else "the shipped policy (no --policy given)"
    try:
        policy = load_policy(args.policy, positive_label=getattr(args, "positive_label", None))
    except (InputError, ValueError, OSError) as exc:
        raise ConfigurationError(f"{policy_name}: {exc}; nothing was recorded") from None
    try:
        frame = read_table(args.data, sep=getattr(args, "sep", None), thousands=getattr(args, "thousands", None),
                       decimal=getattr(args, "decimal", None))
    except (InputError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise ConfigurationError(f"--data {args.data}: {exc}; nothing was recorded") from None
    except Exception:   # noqa: BLE001 - I/O trouble, not configuration: the flow reads it again (with retries) and records the cause
        return GateInputs(policy, policy_name)
    if policy.protected_file is not None:          # c joined by the key (imports torch only then)
        from faux_checks.gate.unmatched import gate_rows

        frame = gate_rows(frame, policy, audit_name=f"--data {args.data}")
    rows = _preflight_rows(frame, policy, data_name=f"--data {args.data}")
    check_policy_columns(rows, policy, data_name=str(args.data), policy_name=policy_name)
    drawn = " (c: one draw from its probabilities)" if policy.protected_probabilities is not None else ""
    findings = inspect_data(rows, policy, name=f"{args.data}{drawn}")
    check_data(findings, policy_name=policy_name)
    return GateInputs(policy, policy_name, frame, findings, rows)


def _preflight_rows(frame, policy, *, data_name: str):
    """``frame`` itself, or with ``[protected_probabilities]`` the rows with the probabilities checked and c's first
    draw in their place (:func:`faux_checks.gate.estimated.preflight_rows`: every offending column named)."""
    if policy.protected_probabilities is None:
        return frame
    from faux_checks.gate.estimated import preflight_rows

    try:
        return preflight_rows(frame, policy, data_name=data_name)[0]
    except ConfigurationError as exc:
        raise ConfigurationError(f"{exc}; nothing was recorded") from None


def prepare_gate(args, tracking_uri: str | None, versions: list[str] | None = None,
                 inputs: GateInputs | None = None) -> GatePlan:
    """Check the configuration of ``faux-checks gate`` and plan the versions; raise before anything is recorded.

    Parameters
    ----------
    args : argparse.Namespace
        The gate command's options (``model_name``, ``data``, ``policy``, ``trust_type``).
    tracking_uri : str or None
        The registry.
    versions : list of str, optional
        ``--version N``: check exactly these (already known to exist) instead of planning.
    inputs : GateInputs, optional
        :func:`read_gate_inputs` already called (else called here).

    Returns
    -------
    GatePlan

    Raises
    ------
    ConfigurationError
        The policy does not load, the data cannot be read or lacks a policy column, the model is
        not registered, or a version's spec/model does not take the data (one line each, with the fix).
    """
    from faux_checks.gate.preflight import check_version_fits
    from faux_checks.provenance import data_sha256
    from faux_checks.registry import Registry

    from .output import library_output_to_stderr

    inputs = inputs if inputs is not None else read_gate_inputs(args)
    policy, frame = inputs.policy, inputs.frame
    judged = inputs.rows if inputs.rows is not None else frame
    registry = Registry(tracking_uri)
    with library_output_to_stderr():
        try:
            if versions is not None:
                plan = GatePlan(todo=list(versions))
            else:
                rows = registry.gate_plan(args.model_name, policy_sha256=policy.sha256(),
                                          data_sha256=data_sha256(frame) if frame is not None else None)
                plan = GatePlan(todo=[r["version"] for r in rows if r["action"] == "new"],
                                regate=[r["version"] for r in rows if r["action"] == "regate"], rows=rows)
        except InputError as exc:   # no such registered model: the message lists the existing ones
            raise ConfigurationError(f"{exc}; nothing was recorded") from None
        with tempfile.TemporaryDirectory(prefix="faux-preflight-") as tmp, _no_progress_bars():
            for version in plan.todo + plan.regate if frame is not None else ():
                try:
                    model_path, spec_path = registry.download(args.model_name, version, Path(tmp) / f"v{version}")
                except Exception:   # noqa: BLE001 - a version's own download trouble: the flow retries it and records the cause
                    continue
                check_version_fits(args.model_name, version, model_path, spec_path, judged, policy,
                                   trusted_types=args.trust_type or ())
    return plan


@contextlib.contextmanager
def _no_progress_bars():
    """MLflow's artifact download bars left out of these read-only downloads (a configuration error stays one line)."""
    key = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    previous = os.environ.get(key)
    os.environ[key] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = previous


def skipped_objects(model_name: str, plan: GatePlan) -> list[dict]:
    """``gate --json``: one object per version left recorded undecided (``"skipped": true``, the reason)."""
    from .output import gate_error_object

    out = []
    for row in plan.skipped:
        obj = gate_error_object(model_name, row["reason"])
        obj["model"]["version"] = row["version"]
        obj.update({"skipped": True})
        out.append(obj)
    return out
