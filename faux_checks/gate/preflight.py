"""Configuration checked before a gate touches the registry.

A gate's configuration is the policy, the audit data and, per version, the feature spec and
model it downloads. When they do not fit together (a policy column the data lacks, a spec that
needs other columns or encodes to a width the model does not take) no version can be decided,
and recording ``undecided`` on every version would turn a typo into a permanent decision. These
checks run on the data already loaded, before any version is claimed, leased or marked running;
each failure is one :class:`~faux_checks.errors.ConfigurationError` line: the column or version,
the counts, the fix (exit code 3 in the CLI).

The rule: everything that is a property of the *inputs given to this run* is
configuration; what belongs to one version and its own files (a model that cannot be loaded
safely, a check that ran but could not decide) stays a per-version ``undecided`` record.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import ConfigurationError, InputError

__all__ = ["check_inputs_fit", "check_policy_columns", "check_version_fits", "policy_columns"]


def policy_columns(policy) -> dict[str, str]:
    """Every data column the policy names, with its role: ``{column: role}``, in the policy's order.

    Roles: ``"protected attribute"``, ``"label"``, ``"admissible column"``, ``"linked column"``,
    ``"linked 'by' column"``. Intersections (``sex×race``) are derived from declared columns and
    are not listed. Our reading of :class:`~faux_checks.gate.policy.Policy` (``protected``,
    ``[[attributes]]``, ``label``, ``[faux] admissible``, ``[linked_columns]``).
    """
    roles: dict[str, str] = {}

    def add(column, role):
        if column and str(column) not in roles:
            roles[str(column)] = role

    def add_links(tables):
        for column, table in (tables or {}).items():
            add(column, "linked column")
            by = table.get("by") if isinstance(table, dict) else None
            add(by, "linked 'by' column")

    for name in [a.column for a in policy.attributes]:
        add(name, "protected attribute")
    add(policy.label, "label")
    for column in policy.faux.admissible:
        add(column, "admissible column")
    for a in policy.attributes:
        for column in a.admissible or ():
            add(column, "admissible column")
        add_links(a.linked_columns)
    return roles


def check_policy_columns(frame: pd.DataFrame, policy, *, data_name: str, policy_name: str) -> None:
    """Raise :class:`ConfigurationError` unless every column the policy names is in the data.

    Parameters
    ----------
    frame : DataFrame of shape (n, columns)
        The audit data as loaded (never modified).
    policy : Policy
        The policy in force.
    data_name : str
        How the message names the data (its file name).
    policy_name : str
        How the message names the policy (``--policy FILE`` or "the shipped policy (no --policy given)").

    Raises
    ------
    ConfigurationError
        One line: each missing column with its role, the data's row and column counts and its first
        columns, and the fix (a policy that names the data's columns).
    """
    roles = policy_columns(policy)
    present = {str(c) for c in frame.columns}
    missing = [(c, r) for c, r in roles.items() if c not in present]
    if not missing:
        return
    shown = ", ".join(map(str, list(frame.columns)[:20])) + (" ..." if frame.shape[1] > 20 else "")
    named = ", ".join(f"'{c}' ({r})" for c, r in missing)
    raise ConfigurationError(
        f"{policy_name} names {len(missing)} column(s) missing from {data_name} ({len(frame):,} rows, "
        f"{frame.shape[1]} columns: {shown}): {named}; nothing was recorded. Fix: give --policy with "
        "protected = \"COLUMN\" and label = \"COLUMN\" (and admissible/linked columns) naming columns of the data")


def check_version_fits(model_name: str, version: str, model_path: str | Path, spec_path: str | Path | None,
                       frame: pd.DataFrame, policy, *, trusted_types=(), encoding_is_configuration: bool = True) -> None:
    """Raise :class:`ConfigurationError` unless the version's feature spec and model take the data.

    The version's model is loaded (safely) and its spec read, then :func:`check_inputs_fit` runs on them,
    for one attribute or several: a fitted scikit-learn Pipeline with no spec attached is encoded by its own
    ColumnTransformer, as the check does (otherwise a skops Pipeline that encodes 10 columns to 28 features is
    refused with "expects 28 encoded features but X has 10"). A model that does not
    load (unsafe file, missing extra) is *not* a configuration error: it is left to the gate, which records
    that version ``undecided`` with the cause; the spec's columns and encoding are still checked.
    ``encoding_is_configuration``: as :func:`check_inputs_fit` (False for ``faux-checks audit``).

    Raises
    ------
    ConfigurationError
        ``v{version} of '{model_name}': `` + the encoding or width error, and that nothing was recorded.
    """
    from ..inputs.tabular import FeatureSpec

    where = f"v{version} of '{model_name}': "
    try:
        spec = FeatureSpec.load(spec_path) if spec_path else None
    except InputError as exc:
        raise ConfigurationError(f"{where}{exc}; nothing was recorded") from None
    try:
        from ..inputs.models import load_model

        model = load_model(model_path, trusted_types=tuple(trusted_types or ()))
    except Exception:   # noqa: BLE001 - a version's own loading trouble: the gate records it undecided, with the cause
        model = None
    check_inputs_fit(model, frame, policy, spec, prefix=where, suffix="; nothing was recorded",
                     encoding_is_configuration=encoding_is_configuration)


def check_inputs_fit(model, frame: pd.DataFrame, policy, feature_spec=None, *, prefix: str = "",
                     suffix: str = "; nothing was recorded", encoding_is_configuration: bool = True) -> None:
    """Raise :class:`ConfigurationError` unless the feature spec and the target model take the data.

    The rows are selected and encoded exactly as the check of the first declared attribute does
    (:func:`~faux_checks.gate.rows.prepare_audit`, with the spec :func:`~faux_checks.inputs.estimators.as_target`
    chooses: the given one, else the one the model carries, such as a Pipeline's transformer, else the one
    every attribute's check shares, :func:`~faux_checks.gate.attributes.shared_feature_spec`) and two
    encoded rows are fed to the model (:func:`~faux_checks.gate.rows.check_model_accepts`), so a spec width
    the model does not take is found here, for one attribute or several. Used by the gate per version (:func:`check_version_fits`) and by ``faux-checks check``.

    Parameters
    ----------
    model : target model or None
        As loaded (torch module, forward-only target, scikit-learn/XGBoost/LightGBM object); None: only the
        spec and the encoding are checked.
    frame : DataFrame of shape (n, columns)
        The data as loaded (never modified).
    policy : Policy
    feature_spec : FeatureSpec, optional
        The spec given; None: the model's own, else the passthrough spec.
    prefix, suffix : str
        Put around the message (which version; what was not recorded or written).
    encoding_is_configuration : bool
        False (``faux-checks check``): an error of the encoding itself (missing protected values, an empty
        column) is not raised here but left to the check, which reports it undecided (exit 2); only missing
        columns, a spec that does not fit the pipeline and a width the model does not take are
        configuration there (exit 3).

    Raises
    ------
    ConfigurationError
        The spec's columns are missing from the data, a given spec does not fit a pipeline's transformer,
        the encoding fails, or the model does not take the encoded width; one line with the fix.
    """
    from ..method._batching import as_tensor
    from .rows import check_model_accepts, prepare_audit

    spec = feature_spec
    try:
        if model is not None:
            from ..inputs.estimators import as_target

            model, spec = as_target(model, feature_spec)
        from .attributes import shared_feature_spec

        spec = shared_feature_spec(frame, policy, spec)
        if spec is not None:
            from .._validation import require_columns

            require_columns(frame, spec.source_columns, what=f"FeatureSpec '{spec.name}'")
        first = next(iter(policy.attribute_policies().values()))   # every attribute's check feeds the model this X
        try:
            from ..inputs.missing import target_takes_missing, with_nan_inputs

            # without the model, missing input values are left to the check (the model may take NaN)
            takes = (target_takes_missing(model, first.missing_values) if model is not None
                     else first.missing_values != "refuse")
            rows = prepare_audit(frame, policy=first, feature_spec=spec, takes_missing=takes)
            model = with_nan_inputs(model, rows.feature_spec) if model is not None else None
        except InputError:
            if encoding_is_configuration:
                raise
            return
        if model is not None:
            check_model_accepts(model, as_tensor(rows.X[:256]), rows.feature_spec)
    except ConfigurationError:
        raise
    except InputError as exc:
        raise ConfigurationError(f"{prefix}{exc}{suffix}") from None
