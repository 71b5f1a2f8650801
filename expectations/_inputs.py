"""Inputs shared by the metric providers (private): models, policy, feature spec, audit rows.

Everything here is plumbing between GX and :mod:`faux_checks`; no fairness logic. The row
selection is :func:`faux_checks.gate.rows.prepare_audit`, the same as in ``check_one_attribute``, so that the
baseline expectations score exactly the individuals the fAux check audits.
"""

from __future__ import annotations

import contextlib
import functools
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from faux_checks.gate.rows import AuditRows, prepare_audit
from faux_checks.inputs.models import load_model
from faux_checks.gate.policy import Policy
from faux_checks.inputs.protected import ProtectedAttribute
from faux_checks.inputs.tabular import FeatureSpec


#: skops types the operator reviewed for the models loaded in this context (:func:`trusting`).
_TRUSTED: ContextVar[tuple[str, ...]] = ContextVar("faux_checks_trusted_types", default=())


@contextlib.contextmanager
def trusting(types):
    """Within this block, :func:`cached_model` passes ``types`` as ``trusted_types`` to ``load_model``.

    The gate flow wraps its Great Expectations validation in it (CLI ``gate --trust-type NAME``):
    a ``.skops`` version whose types skops does not trust by default loads once its operator has
    reviewed and named them. ``types`` : iterable of fully qualified type names (``"mylib.MyScaler"``);
    empty trusts nothing beyond skops's defaults.
    """
    token = _TRUSTED.set(tuple(sorted(set(types or ()))))
    try:
        yield
    finally:
        _TRUSTED.reset(token)


@functools.lru_cache(maxsize=4)   # one version's model and aux model (and the previous ones)
def _load_model_cached(path: str, mtime_ns: int, size: int, trusted: tuple[str, ...] = ()):
    return load_model(path, trusted_types=trusted)


def clear_model_cache() -> None:
    """Forget the models :func:`cached_model` loaded (the gate does after each version: a gate over many
    versions kept up to 16 loaded models alive)."""
    _load_model_cached.cache_clear()


def cached_model(path: str):
    """``load_model(path)``, cached per (path, mtime, size, trusted types) within the process.

    A changed file is loaded again; a refused or broken file is never cached (the exception
    propagates every time). The skops types named by an enclosing :func:`trusting` are trusted.
    """
    trusted = _TRUSTED.get()
    p = Path(path)
    try:
        stat = p.stat()
    except OSError:
        return load_model(path, trusted_types=trusted)  # raises the library's InputError naming the path
    return _load_model_cached(str(p.resolve()), stat.st_mtime_ns, stat.st_size, trusted)


def table_records(execution_engine, metric_domain_kwargs: dict) -> pd.DataFrame:
    """The whole batch (row condition applied), not only the expectation's column.

    The fAux check needs every feature column; the protected column named by the
    expectation's ``column`` is only its domain anchor.
    """
    table_domain = {k: v for k, v in metric_domain_kwargs.items() if k != "column"}
    return execution_engine.get_domain_records(domain_kwargs=table_domain)


@dataclass(frozen=True)
class AuditInputs:
    """What a baseline metric needs: encoded features of the audited rows and their groups."""

    policy: Policy
    target_model: Any
    X: np.ndarray                   # (n, d) float32
    protected: ProtectedAttribute
    values: np.ndarray              # (n,) encoded protected values of the audited rows
    row_index: np.ndarray           # (n,) input-row positions
    y_true: np.ndarray | None       # (n,) labels when the policy names a label column
    feature_spec: FeatureSpec | None = None   # the spec the rows were encoded with
    rows: AuditRows | None = None             # the same rows, with their source frame


def audit_inputs(frame: pd.DataFrame, *, model_path: str, feature_spec_path: str | None,
                 policy_json: str) -> AuditInputs:
    """Load the model, policy and spec, and encode the rows :func:`check_one_attribute` audits (:func:`prepare_audit`)."""
    policy = Policy.model_validate_json(policy_json)
    from faux_checks.inputs.estimators import as_target

    model, spec = as_target(cached_model(model_path), FeatureSpec.load(feature_spec_path) if feature_spec_path else None)
    from faux_checks.inputs.missing import target_takes_missing, with_nan_inputs

    rows = prepare_audit(frame, policy=policy, feature_spec=spec,
                         takes_missing=target_takes_missing(model, policy.missing_values))
    model = with_nan_inputs(model, rows.feature_spec)       # NaN where an indicator says missing
    return AuditInputs(policy, model, rows.X, rows.protected, rows.values, rows.row_index, rows.y_true,
                       rows.feature_spec, rows)
