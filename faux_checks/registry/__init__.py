"""Model-registry adapter (MLflow): new versions, artifacts, gate tags, aliases, audit runs.

The gate's view of a registry is small:

- a registered model has numbered **versions**; each version holds two artifacts, the target
  model file (TorchScript / torch.export / state dict, see :mod:`faux_checks.inputs.models`) and,
  optionally, its :class:`~faux_checks.inputs.tabular.FeatureSpec` JSON;
- a version the gate has not decided yet is **new**; the gate marks it ``running``, decides, then
  records the decision as version tags (``fairness_gate`` = ``passed`` / ``failed`` /
  ``undecided``, plus the numbers behind it);
- only a version whose recorded decision is ``passed`` can receive the deployment **alias**
  (``models:/name@deployable``);
- every decision also gets an MLflow **run** holding metrics, parameters and the report files:
  the audit trail.

Everything else (the maths, the policy, the decision) lives in the library; this package only
moves strings and files: :mod:`.client` (the MLflow client, retries on sqlite locks, lookups),
:mod:`.versions` (registration, reading, download) and :mod:`.trail` (decisions, runs, the
alias), joined in :class:`Registry`. MLflow is imported inside the functions that need it (≈1.4 s import),
never at ``import faux_checks``.

Default store: an sqlite file, ``$FAUX_CHECKS_HOME/mlflow.db`` (``~/.faux-checks/mlflow.db``),
with artifacts in ``mlartifacts/`` next to it; ``MLFLOW_TRACKING_URI`` (e.g. a real tracking
server) overrides it. The same URI is used for tracking and the registry.
"""

from __future__ import annotations

from .client import (
    AUDIT_TAG,
    DEFAULT_ALIAS,
    GATE_TAG,
    PENDING,
    PROMOTION_TAG,
    RUNNING,
    default_tracking_uri,
)
from .trail import DecisionTrail
from .versions import ModelVersions

__all__ = ["AUDIT_TAG", "DEFAULT_ALIAS", "GATE_TAG", "PENDING", "PROMOTION_TAG", "RUNNING", "Registry",
           "default_tracking_uri"]


class Registry(ModelVersions, DecisionTrail):
    """Thin adapter over an MLflow tracking store and model registry.

    Parameters
    ----------
    tracking_uri : str, optional
        MLflow tracking and registry URI (``sqlite:///path/mlflow.db``, ``http://host:5000``, ...).
        Default: :func:`default_tracking_uri`. For an ``sqlite:///`` URI, experiments created
        here store their artifacts in ``mlartifacts/`` next to the database file (MLflow's own
        default would be ``./mlruns`` under the current directory).

    Attributes
    ----------
    tracking_uri : str
        The URI in use.
    client : mlflow.MlflowClient
        The underlying client (tracking and registry on the same URI).

    Raises
    ------
    InputError
        If ``tracking_uri`` is an sqlite URI whose directory does not exist.

    Notes
    -----
    Every call that touches the store is retried (≤ 5 tries, 0.1 s doubling) when sqlite reports
    a lock held by a concurrent writer; no other error is retried. Tags written on versions:
    ``model_sha256``, ``model_file``, ``feature_spec_file`` / ``feature_spec_sha256`` (at
    registration); ``fairness_gate`` and ``fairness_*`` (by the gate); ``fairness_audit`` and
    ``fairness_audit_*`` (by the drift audit, :meth:`record_audit`).

    Examples
    --------
    >>> reg = Registry("sqlite:////tmp/reg/mlflow.db")
    >>> v = reg.register_version("credit", "model.pt", "spec.json")
    >>> reg.new_versions("credit")
    ['1']
    """
