"""Baseline testers as Great Expectations expectations (reported next to fAux; ``gating`` opt-in).

- FTA (``faux.fta``): share of individuals whose ‖∇ₓ P(y|x)‖_p exceeds ``threshold``
  (:class:`faux_checks.baselines.FTATester`), at most ``max_flagged_fraction`` (None = report only).
- Weighted FTA, Unfair Map, FlipTest, FTU flip (``faux.weighted_fta``, ``faux.unfair_map``,
  ``faux.fliptest``, ``faux.ftu_flip``): share of individuals whose score exceeds ``threshold``,
  scored by :func:`faux_checks.gate.testers.baseline_scores` (run_check's numbers), at most
  ``max_flagged_fraction`` (None = report only); "not applicable" (success, observed None) when
  the tester does not fit the target (FTU flip without the protected input, FlipTest with a
  continuous attribute).
- Group metrics (``faux.demographic_parity_difference``, ``faux.equalized_odds_difference``):
  fairlearn's differences on the predictions P(y|x) > 0.5 across protected groups
  (:func:`faux_checks.baselines.group_metrics`), at most ``threshold``.

Each metric depends on the suite's ``faux.check`` metric (the same model, feature spec, aux model and
policy: GX computes it once per validation) and reads the tester's result that ``run_check`` already
computed on the audited rows (``check["testers"]``): the expectations validate, they do not score
again. Only an expectation whose settings differ from its policy's (a hand-built one), or whose tester
the check did not run, scores the rows itself (``expectations._inputs.audit_inputs``, one call into the
tester). Errors surface as ``exception_info`` (suite: ``undecided``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Literal, Optional, Union

import numpy as np
from great_expectations.compatibility import pydantic
from great_expectations.compatibility.typing_extensions import override
from great_expectations.execution_engine import ExecutionEngine, PandasExecutionEngine
from great_expectations.expectations.expectation import ColumnAggregateExpectation
from great_expectations.expectations.metrics.column_aggregate_metric_provider import ColumnAggregateMetricProvider
from great_expectations.expectations.metrics.metric_provider import metric_value
from great_expectations.validator.metric_configuration import MetricConfiguration

from faux_checks.baselines import FTATester, group_metrics
from faux_checks.errors import InputError
from faux_checks.gate.tester_table import TESTERS
from faux_checks.method._batching import as_tensor
from faux_checks.method.forward import is_forward_only
from faux_checks.method.output import TargetOutput, predict_probability, resolve_output_form

from ._inputs import audit_inputs, table_records
from .faux import FAUX_METRIC, FauxCheck

__all__ = [
    "ExpectFtaFlaggedFractionToBeAtMost",
    "ExpectDemographicParityDifferenceToBeAtMost",
    "ExpectEqualizedOddsDifferenceToBeAtMost",
    "FtaFlaggedFraction",
    "DemographicParityDifference",
    "EqualizedOddsDifference",
    "FTA_METRIC",
    "DP_METRIC",
    "EO_METRIC",
]

FTA_METRIC = "faux.fta"
DP_METRIC = "faux.demographic_parity_difference"
EO_METRIC = "faux.equalized_odds_difference"

COLUMN_DESCRIPTION = "The protected attribute column (policy 'protected'); the metric reads the whole table."
MODEL_PATH_DESCRIPTION = "Path of the target model (TorchScript or torch.export; never unpickled)."
FEATURE_SPEC_PATH_DESCRIPTION = (
    "Path of the FeatureSpec JSON the target model was trained with; None = numeric columns as they are."
)
POLICY_JSON_DESCRIPTION = (
    "The gate policy as JSON; supplies protected/label columns, missing-value rule, max_rows, seed and output form."
)
AUX_MODEL_PATH_DESCRIPTION = (
    "The suite's fAux expectation's aux model path (None: trained); names the fAux check whose tester results "
    "this expectation reads, so it must equal that expectation's (build_suite sets both)."
)
GATING_DESCRIPTION = "If true, an unsuccessful result fails the gate; otherwise it is only reported."
FTA_SHORT_DESCRIPTION = (
    "Expect the share of individuals whose target-model input gradient norm ‖∇f‖_p exceeds threshold "
    "(FTA, John et al. 2020) to be at most max_flagged_fraction."
)
FTA_THRESHOLD_DESCRIPTION = "Gradient-norm threshold (probability per unit of the encoded features)."
FTA_MAX_FLAGGED_FRACTION_DESCRIPTION = "Largest allowed share of individuals over threshold; None = report only."
FTA_P_DESCRIPTION = "Order p of the ℓp norm (≥ 1)."
DP_SHORT_DESCRIPTION = (
    "Expect the demographic parity difference (max − min selection rate across protected groups, "
    "predictions P(y|x) > 0.5) to be at most threshold."
)
DP_THRESHOLD_DESCRIPTION = "Largest allowed demographic parity difference, in [0, 1]."
EO_SHORT_DESCRIPTION = (
    "Expect the equalized odds difference (larger of the TPR and FPR gaps across protected groups, "
    "predictions P(y|x) > 0.5, policy label column) to be at most threshold."
)
EO_THRESHOLD_DESCRIPTION = "Largest allowed equalized odds difference, in [0, 1]."

_LIBRARY_METADATA: Dict[str, Union[str, list, bool]] = {
    "maturity": "experimental",
    "tags": ["fairness", "group fairness", "faux-checks"],
    "contributors": ["faux-checks"],
    "requirements": ["faux-checks", "torch", "fairlearn"],
    "has_full_test_suite": True,
    "manually_reviewed_code": True,
}


# ---------------------------------------------------------------------------------- metrics
class _ReadsTheCheck(ColumnAggregateMetricProvider):
    """Base of the baseline metrics: each depends on the suite's ``faux.check`` (computed once per validation).

    The dependency has the fAux expectation's exact domain and value kwargs (model, feature spec, aux model,
    policy), so GX resolves one ``run_check`` for the fAux expectation and every baseline metric.
    """

    @classmethod
    @override
    def _get_evaluation_dependencies(cls, metric: MetricConfiguration, configuration=None, execution_engine=None,
                                     runtime_configuration: Optional[dict] = None):
        dependencies = super()._get_evaluation_dependencies(
            metric=metric, configuration=configuration, execution_engine=execution_engine,
            runtime_configuration=runtime_configuration)
        kw = metric.metric_value_kwargs or {}
        dependencies[FAUX_METRIC] = MetricConfiguration(
            metric_name=FAUX_METRIC, metric_domain_kwargs=metric.metric_domain_kwargs,
            metric_value_kwargs={k: kw.get(k) for k in FauxCheck.value_keys})
        return dependencies


def _computed_entry(metrics: dict, tester: str, kw: dict, params: tuple = ()) -> tuple[dict, dict] | None:
    """(the check, its entry for ``tester``) when ``run_check`` computed it with this metric's settings, else None.

    Reused only when the policy enables the tester with the same threshold and parameters as the metric's
    kwargs and the check holds its entry; a defined value, or a per-individual tester that is not applicable.
    """
    from faux_checks.gate.policy import Policy

    check = metrics.get(FAUX_METRIC)
    if not isinstance(check, dict) or not isinstance(check.get("testers"), dict):
        return None
    entry = check["testers"].get(tester)
    settings = Policy.model_validate_json(kw["policy_json"]).testers.get(tester)
    if not isinstance(entry, dict) or settings is None or not settings.enabled:
        return None
    if kw.get("threshold") is not None and float(kw["threshold"]) != float(settings.threshold):
        return None
    if any(kw.get(k) is not None and kw[k] != getattr(settings, k) for k in params):
        return None
    if entry.get("value") is None and not (entry.get("statistic") == "flagged_fraction" and entry.get("summary")):
        return None
    return check, entry


def _flagged_from_check(metrics: dict, tester: str, kw: dict, params: tuple) -> dict | None:
    """A per-individual tester's metric value from the check's entry (None: score the rows instead)."""
    found = _computed_entry(metrics, tester, kw, params)
    if found is None:
        return None
    check, entry = found
    summary = {"statistic": "flagged_fraction", "tester": tester, "threshold": float(entry["threshold"]),
               **{k: kw.get(k) for k in params}, "n_individuals": int(check["n_individuals"]), "source": "run_check"}
    if entry.get("value") is None:
        return {**summary, "value": None, "not_applicable": entry.get("summary")}
    return {**summary, "value": float(entry["value"]), "n_flagged": entry.get("n_flagged"),
            "rule": entry.get("description"), "p50": entry.get("p50"), "p90": entry.get("p90")}


class FtaFlaggedFraction(_ReadsTheCheck):
    """``faux.fta``: FTA scores of the audited rows summarised against ``threshold``."""

    metric_name = FTA_METRIC
    value_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold", "p")

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(cls, execution_engine, metric_domain_kwargs: dict, metric_value_kwargs: dict,
                metrics: dict[str, Any], runtime_configuration: dict) -> dict:
        kw = metric_value_kwargs
        reused = _flagged_from_check(metrics, "fta", kw, ("p",))
        if reused is not None:
            return reused
        inputs = audit_inputs(table_records(execution_engine, metric_domain_kwargs), model_path=kw["model_path"],
                              feature_spec_path=kw.get("feature_spec_path"), policy_json=kw["policy_json"])
        output = TargetOutput(form=inputs.policy.target_output, target_class=inputs.policy.target_class)
        if is_forward_only(inputs.target_model):
            return {"statistic": "flagged_fraction", "value": None, "threshold": float(kw["threshold"]),
                    "not_applicable": ("not applicable: FTA needs the target's input gradient; the target is "
                                       f"forward-only ({inputs.target_model.access})")}
        scores = FTATester(inputs.target_model, output=output, p=float(kw["p"])).score(inputs.X)  # (n,)
        threshold = float(kw["threshold"])
        return {"statistic": "flagged_fraction", "value": float(np.mean(scores > threshold)),
                "threshold": threshold, "p": float(kw["p"]), "n_individuals": int(len(scores)),
                "n_flagged": int(np.sum(scores > threshold)),
                "p50": float(np.median(scores)), "p90": float(np.quantile(scores, 0.9))}


def _group_metric(execution_engine, metric_domain_kwargs: dict, kw: dict, key: str, metrics: dict | None = None) -> dict:
    tester = "demographic_parity" if key == "demographic_parity_difference" else "equalized_odds"
    found = _computed_entry(metrics or {}, tester, {**kw, "threshold": None})
    if found is not None and found[1].get("value") is not None:
        check, entry = found
        return {"statistic": key, "value": float(entry["value"]), "n_individuals": int(check["n_individuals"]),
                "groups": sorted(str(g.get("group")) for g in check.get("by_group") or []), "source": "run_check"}
    inputs = audit_inputs(table_records(execution_engine, metric_domain_kwargs), model_path=kw["model_path"],
                          feature_spec_path=kw.get("feature_spec_path"), policy_json=kw["policy_json"])
    policy = inputs.policy
    needs_label = key == "equalized_odds_difference"
    if needs_label and inputs.y_true is None:
        raise InputError("equalized odds needs a label column, but the policy names none; set label = \"...\" "
                         "in the policy or disable testers.equalized_odds")
    Xt = as_tensor(inputs.X)
    output = resolve_output_form(inputs.target_model, Xt[:256],
                                 TargetOutput(form=policy.target_output, target_class=policy.target_class))
    prob = predict_probability(inputs.target_model, Xt, output)                    # (n,)
    groups = inputs.protected.group_labels(inputs.values)                        # (n,)
    y_pred = (prob > 0.5).astype(int)
    value = group_metrics(y_pred, groups, inputs.y_true if needs_label else None)[key]
    return {"statistic": key, "value": float(value), "n_individuals": int(len(y_pred)),
            "groups": sorted(map(str, set(groups)))}


class DemographicParityDifference(_ReadsTheCheck):
    """``faux.demographic_parity_difference`` on the audited rows."""

    metric_name = DP_METRIC
    value_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json")

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(cls, execution_engine, metric_domain_kwargs: dict, metric_value_kwargs: dict,
                metrics: dict[str, Any], runtime_configuration: dict) -> dict:
        return _group_metric(execution_engine, metric_domain_kwargs, metric_value_kwargs,
                             "demographic_parity_difference", metrics)


class EqualizedOddsDifference(_ReadsTheCheck):
    """``faux.equalized_odds_difference`` on the audited rows (needs the policy's label column)."""

    metric_name = EO_METRIC
    value_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json")

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(cls, execution_engine, metric_domain_kwargs: dict, metric_value_kwargs: dict,
                metrics: dict[str, Any], runtime_configuration: dict) -> dict:
        return _group_metric(execution_engine, metric_domain_kwargs, metric_value_kwargs,
                             "equalized_odds_difference", metrics)


# ---------------------------------------------------------------------------------- expectations
def _missing(metric_name: str) -> Dict[str, Any]:
    return {"success": False, "result": {"observed_value": None, "details": {
        "metric_missing": True, "reasons": [f"metric {metric_name} was not computed"]}}}


class _BaselineExpectation(ColumnAggregateExpectation):
    """Fields and ``_validate`` shared by the baseline expectations (not registered: no metric)."""

    column: str = pydantic.Field(min_length=1, description=COLUMN_DESCRIPTION)
    model_path: str = pydantic.Field(min_length=1, description=MODEL_PATH_DESCRIPTION)
    feature_spec_path: Optional[str] = pydantic.Field(None, description=FEATURE_SPEC_PATH_DESCRIPTION)
    aux_model_path: Optional[str] = pydantic.Field(None, description=AUX_MODEL_PATH_DESCRIPTION)
    policy_json: str = pydantic.Field(min_length=2, description=POLICY_JSON_DESCRIPTION)
    gating: bool = pydantic.Field(False, description=GATING_DESCRIPTION)

    library_metadata: ClassVar[Dict[str, Union[str, list, bool]]] = _LIBRARY_METADATA
    _library_metadata = library_metadata
    _metric: ClassVar[str] = ""
    _limit_key: ClassVar[str] = "threshold"

    @classmethod
    @override
    def is_abstract(cls) -> bool:
        return not cls._metric or super().is_abstract()

    @override
    def _validate(self, metrics: Dict, runtime_configuration: Optional[dict] = None,
                  execution_engine: Optional[ExecutionEngine] = None) -> Dict[str, Any]:
        summary = metrics.get(self._metric)
        if isinstance(summary, dict) and summary.get("not_applicable"):
            return {"success": True, "result": {"observed_value": None, "details": {
                **summary, "limit": getattr(self, self._limit_key), "gating": self.gating}}}
        if not isinstance(summary, dict) or summary.get("value") is None or not np.isfinite(summary["value"]):
            return _missing(self._metric)
        limit = getattr(self, self._limit_key)
        value = float(summary["value"])
        success = True if limit is None else value <= limit
        return {"success": success, "result": {"observed_value": value, "details": {
            **summary, "limit": limit, "gating": self.gating}}}


class ExpectFtaFlaggedFractionToBeAtMost(_BaselineExpectation):
    __doc__ = f"""{FTA_SHORT_DESCRIPTION}

    Args:
        column (str): {COLUMN_DESCRIPTION}
        model_path (str): {MODEL_PATH_DESCRIPTION}
        feature_spec_path (str or None): {FEATURE_SPEC_PATH_DESCRIPTION}
        policy_json (str): {POLICY_JSON_DESCRIPTION}
        threshold (float): {FTA_THRESHOLD_DESCRIPTION}
        max_flagged_fraction (float or None): {FTA_MAX_FLAGGED_FRACTION_DESCRIPTION}
        p (float): {FTA_P_DESCRIPTION}
        gating (bool): {GATING_DESCRIPTION}

    Returns:
        ``observed_value`` = share of individuals over ``threshold``; ``details``: n, p50, p90.

    Notes:
        Local limit of John, Vijaykeerthy and Saha, UAI 2020. It ignores the protected attribute:
        a model steep in any direction is flagged (Castiglione et al. 2022 §2).
    """

    threshold: float = pydantic.Field(description=FTA_THRESHOLD_DESCRIPTION)
    max_flagged_fraction: Optional[float] = pydantic.Field(None, ge=0, le=1,
                                                           description=FTA_MAX_FLAGGED_FRACTION_DESCRIPTION)
    p: float = pydantic.Field(2.0, ge=1, description=FTA_P_DESCRIPTION)

    metric_dependencies = (FTA_METRIC,)
    success_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold", "p",
                    "max_flagged_fraction",
                    "gating")
    args_keys = ("column", "model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold",
                 "max_flagged_fraction",
                 "p", "gating")
    _metric: ClassVar[str] = FTA_METRIC
    _limit_key: ClassVar[str] = "max_flagged_fraction"


class ExpectDemographicParityDifferenceToBeAtMost(_BaselineExpectation):
    __doc__ = f"""{DP_SHORT_DESCRIPTION}

    Args:
        column (str): {COLUMN_DESCRIPTION}
        model_path (str): {MODEL_PATH_DESCRIPTION}
        feature_spec_path (str or None): {FEATURE_SPEC_PATH_DESCRIPTION}
        policy_json (str): {POLICY_JSON_DESCRIPTION}
        threshold (float): {DP_THRESHOLD_DESCRIPTION}
        gating (bool): {GATING_DESCRIPTION}

    Returns:
        ``observed_value`` = the demographic parity difference.

    Notes:
        fairlearn.metrics.demographic_parity_difference (Bird et al. 2020). A group metric says
        nothing about individuals; it is reported next to fAux, not instead of it.
    """

    threshold: float = pydantic.Field(description=DP_THRESHOLD_DESCRIPTION)

    metric_dependencies = (DP_METRIC,)
    success_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold", "gating")
    args_keys = ("column",) + success_keys
    _metric: ClassVar[str] = DP_METRIC


class ExpectEqualizedOddsDifferenceToBeAtMost(_BaselineExpectation):
    __doc__ = f"""{EO_SHORT_DESCRIPTION}

    Args:
        column (str): {COLUMN_DESCRIPTION}
        model_path (str): {MODEL_PATH_DESCRIPTION}
        feature_spec_path (str or None): {FEATURE_SPEC_PATH_DESCRIPTION}
        policy_json (str): {POLICY_JSON_DESCRIPTION}
        threshold (float): {EO_THRESHOLD_DESCRIPTION}
        gating (bool): {GATING_DESCRIPTION}

    Returns:
        ``observed_value`` = the equalized odds difference.

    Notes:
        fairlearn.metrics.equalized_odds_difference (Hardt et al. 2016; Bird et al. 2020).
    """

    threshold: float = pydantic.Field(description=EO_THRESHOLD_DESCRIPTION)

    metric_dependencies = (EO_METRIC,)
    success_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold", "gating")
    args_keys = ("column",) + success_keys
    _metric: ClassVar[str] = EO_METRIC


# ---------------------------------------------------------------------------------- per-individual testers
# Weighted FTA, Unfair Map, FlipTest and FTU flip: each scores the audited rows with
# faux_checks.gate.testers.baseline_scores (the function run_check uses), and its expectation compares
# the share of individuals over ``threshold`` with ``max_flagged_fraction``. One metric provider
# and one thin expectation subclass per tester; the shared behaviour is in the bases.
WEIGHTED_FTA_METRIC = "faux.weighted_fta"
UNFAIR_MAP_METRIC = "faux.unfair_map"
FLIPTEST_METRIC = "faux.fliptest"
FTU_FLIP_METRIC = "faux.ftu_flip"
LINKED_COLUMNS_METRIC = "faux.linked_columns"

#: Shipped per-individual testers' settings fields (read from the table: faux_checks.gate.tester_table.TESTERS).
TESTER_PARAMS: Dict[str, tuple] = {n: t.params for n, t in TESTERS.items() if t.per_individual and n != "fta"}


def _params(tester: str) -> tuple:  # the settings fields the entry reads beyond threshold (the live table)
    return TESTERS[tester].params


_COMMON_VALUE_KEYS = ("model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold")
MAX_FLAGGED_FRACTION_DESCRIPTION = "Largest allowed share of individuals over threshold; None = report only."


def _tester_flagged_fraction(tester: str, execution_engine, metric_domain_kwargs: dict, kw: dict) -> dict:
    """Scores of ``tester`` on the audited rows, summarised against ``threshold`` (run_check's numbers)."""
    from faux_checks.gate.testers import baseline_scores

    inputs = audit_inputs(table_records(execution_engine, metric_domain_kwargs), model_path=kw["model_path"],
                          feature_spec_path=kw.get("feature_spec_path"), policy_json=kw["policy_json"])
    policy = inputs.policy
    params = {k: kw[k] for k in _params(tester) if kw.get(k) is not None}
    settings = TESTERS[tester].settings(threshold=float(kw["threshold"]), **params)
    rows = inputs.rows
    output = resolve_output_form(inputs.target_model, as_tensor(rows.X[:256]),
                                 TargetOutput(form=policy.target_output, target_class=policy.target_class))
    scores, description = baseline_scores(tester, settings, inputs.target_model, output, rows, seed=policy.seed,
                                          links=policy.linked_columns)
    summary = {"statistic": "flagged_fraction", "tester": tester, "threshold": settings.threshold,
               **{k: getattr(settings, k) for k in _params(tester)}, "n_individuals": int(len(rows.X))}
    if scores is None:
        return {**summary, "value": None, "not_applicable": description}
    flagged = scores > settings.threshold
    return {**summary, "value": float(np.mean(flagged)), "n_flagged": int(flagged.sum()), "rule": description,
            "p50": float(np.median(scores)), "p90": float(np.quantile(scores, 0.9))}


def _tester_metric_provider(class_name: str, tester: str, metric_name: str, doc: str) -> type:
    """One metric provider per per-individual tester: ``_tester_flagged_fraction`` on the audited rows.

    Defining the class registers the metric with Great Expectations (its metaclass), as a class
    statement would.
    """

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(cls, execution_engine, metric_domain_kwargs: dict, metric_value_kwargs: dict,
                metrics: dict[str, Any], runtime_configuration: dict) -> dict:
        reused = _flagged_from_check(metrics, tester, metric_value_kwargs, _params(tester))
        if reused is not None:
            return reused
        return _tester_flagged_fraction(tester, execution_engine, metric_domain_kwargs, metric_value_kwargs)

    return type(class_name, (_ReadsTheCheck,), {
        "__doc__": doc, "__module__": __name__, "metric_name": metric_name,
        "value_keys": _COMMON_VALUE_KEYS + _params(tester), "_pandas": _pandas})


WeightedFtaFlaggedFraction = _tester_metric_provider(
    "WeightedFtaFlaggedFraction", "weighted_fta", WEIGHTED_FTA_METRIC,
    "``faux.weighted_fta``: ‖P_S ∇f‖_p of the audited rows against ``threshold``.")
UnfairMapFlaggedFraction = _tester_metric_provider(
    "UnfairMapFlaggedFraction", "unfair_map", UNFAIR_MAP_METRIC,
    "``faux.unfair_map``: Unfair Map loss ratio of the audited rows against ``threshold``.")
FlipTestFlaggedFraction = _tester_metric_provider(
    "FlipTestFlaggedFraction", "fliptest", FLIPTEST_METRIC,
    "``faux.fliptest``: FlipTest output change of the audited rows against ``threshold``.")
FtuFlipFlaggedFraction = _tester_metric_provider(
    "FtuFlipFlaggedFraction", "ftu_flip", FTU_FLIP_METRIC,
    "``faux.ftu_flip``: FTU flip output change of the audited rows against ``threshold``.")
LinkedColumnsFlaggedFraction = _tester_metric_provider(
    "LinkedColumnsFlaggedFraction", "linked_columns", LINKED_COLUMNS_METRIC,
    "``faux.linked_columns``: |Δŷ| under the policy's linked-columns counterfactual against ``threshold``.")


def _default(field: str):
    return TESTERS["fta"].settings.model_fields[field].default     # the shipped testers' settings model


class TesterFlaggedFractionExpectation(_BaselineExpectation):
    """Shared by the per-individual tester expectations (abstract: no metric, not registered).

    ``observed_value`` = share of audited individuals whose score exceeds ``threshold``; success
    when it is at most ``max_flagged_fraction`` (always, when that is None: report only). A tester
    that does not apply to the target (e.g. FTU flip of a target without the protected input) is
    a success with ``observed_value`` None and the reason in ``details.not_applicable``, as in
    ``run_check``'s report.
    """

    threshold: float = pydantic.Field(description="Score above which an individual is flagged (tester's unit).")
    max_flagged_fraction: Optional[float] = pydantic.Field(None, ge=0, le=1,
                                                           description=MAX_FLAGGED_FRACTION_DESCRIPTION)

    _tester: ClassVar[str] = ""
    _limit_key: ClassVar[str] = "max_flagged_fraction"

    @classmethod
    def from_settings(cls, settings, **common) -> "TesterFlaggedFractionExpectation":
        """The expectation for a policy's ``TesterSettings`` (``common``: column, model_path, ...)."""
        return cls(**common, threshold=settings.threshold, max_flagged_fraction=settings.max_flagged_fraction,
                   gating=settings.gating, **{k: getattr(settings, k) for k in _params(cls._tester)})

    @override
    def _validate(self, metrics: Dict, runtime_configuration: Optional[dict] = None,
                  execution_engine: Optional[ExecutionEngine] = None) -> Dict[str, Any]:
        summary = metrics.get(self._metric)
        if isinstance(summary, dict) and summary.get("not_applicable"):
            return {"success": True, "result": {"observed_value": None, "details": {
                **summary, "limit": self.max_flagged_fraction, "gating": self.gating}}}
        return super()._validate(metrics, runtime_configuration, execution_engine)


_KEYS = ("model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold", "max_flagged_fraction",
         "gating")


class ExpectWeightedFtaFlaggedFractionToBeAtMost(TesterFlaggedFractionExpectation):
    """Expect the share of individuals whose target gradient along the sensitive subspace, ‖P_S ∇f‖_p, exceeds
    threshold to be at most max_flagged_fraction (weighted FTA; S from a linear model of the protected attribute,
    Yurochkin et al. 2020, Ruoss et al. 2020). See :class:`faux_checks.baselines.WeightedFTATester`.
    """

    p: float = pydantic.Field(_default("p"), ge=1, description="Order p of the ℓp norm (≥ 1).")
    subspace: Literal["sensitive", "complement"] = pydantic.Field(
        _default("subspace"), description="'sensitive': P_S ∇f; 'complement': (I − P_S) ∇f.")

    metric_dependencies = (WEIGHTED_FTA_METRIC,)
    success_keys = _KEYS + TESTER_PARAMS["weighted_fta"]
    args_keys = ("column",) + success_keys
    _metric: ClassVar[str] = WEIGHTED_FTA_METRIC
    _tester: ClassVar[str] = "weighted_fta"


class ExpectUnfairMapFlaggedFractionToBeAtMost(TesterFlaggedFractionExpectation):
    """Expect the share of individuals whose Unfair Map loss ratio (gradient-flow attack in the sensitive-subspace
    fair metric, Maity et al. 2021) exceeds threshold to be at most max_flagged_fraction.
    See :class:`faux_checks.baselines.UnfairMapTester`.
    """

    steps: int = pydantic.Field(_default("steps"), ge=1, description="Gradient-ascent steps.")
    step_size: float = pydantic.Field(_default("step_size"), gt=0, description="Step η.")
    penalty: float = pydantic.Field(_default("penalty"), ge=0, description="λ of the fair-metric penalty.")

    metric_dependencies = (UNFAIR_MAP_METRIC,)
    success_keys = _KEYS + TESTER_PARAMS["unfair_map"]
    args_keys = ("column",) + success_keys
    _metric: ClassVar[str] = UNFAIR_MAP_METRIC
    _tester: ClassVar[str] = "unfair_map"


class ExpectFlipTestFlaggedFractionToBeAtMost(TesterFlaggedFractionExpectation):
    """Expect the share of individuals whose prediction changes by more than threshold when mapped to the other
    group by optimal transport (FlipTest, Black et al. 2020) to be at most max_flagged_fraction.
    See :class:`faux_checks.baselines.FlipTestTester`.
    """

    method: Literal["exact", "sinkhorn", "quantile"] = pydantic.Field(
        _default("method"), description="Exact OT, entropic OT, or the per-feature quantile map.")
    max_n: int = pydantic.Field(_default("max_n"), ge=2, description="Rows per group in the OT problem.")
    reg: float = pydantic.Field(_default("reg"), gt=0, description="Entropic regularisation (sinkhorn).")

    metric_dependencies = (FLIPTEST_METRIC,)
    success_keys = _KEYS + TESTER_PARAMS["fliptest"]
    args_keys = ("column",) + success_keys
    _metric: ClassVar[str] = FLIPTEST_METRIC
    _tester: ClassVar[str] = "fliptest"


class ExpectFtuFlipFlaggedFractionToBeAtMost(TesterFlaggedFractionExpectation):
    """Expect the share of individuals whose prediction changes by more than threshold when only the protected
    attribute's own input columns are flipped (fairness through unawareness) to be at most max_flagged_fraction.
    Not applicable (success, observed None) when the target does not take the protected attribute as input.
    See :class:`faux_checks.baselines.FTUFlipTester`.
    """

    metric_dependencies = (FTU_FLIP_METRIC,)
    success_keys = _KEYS
    args_keys = ("column",) + success_keys
    _metric: ClassVar[str] = FTU_FLIP_METRIC
    _tester: ClassVar[str] = "ftu_flip"


class ExpectLinkedColumnsFlaggedFractionToBeAtMost(TesterFlaggedFractionExpectation):
    """Expect the share of individuals whose prediction changes by more than threshold (probability points) when
    the protected attribute changes to another group and the policy's linked columns map their values with it
    (e.g. relationship Husband ↔ Wife for sex), everything else fixed, to be at most max_flagged_fraction.
    Exact by definition for the declared values; blind to other proxies (fAux covers those).
    See :class:`faux_checks.baselines.LinkedColumnsTester`.
    """

    metric_dependencies = (LINKED_COLUMNS_METRIC,)
    success_keys = _KEYS
    args_keys = ("column",) + success_keys
    _metric: ClassVar[str] = LINKED_COLUMNS_METRIC
    _tester: ClassVar[str] = "linked_columns"


__all__ += [
    "ExpectLinkedColumnsFlaggedFractionToBeAtMost",
    "ExpectWeightedFtaFlaggedFractionToBeAtMost", "ExpectUnfairMapFlaggedFractionToBeAtMost",
    "ExpectFlipTestFlaggedFractionToBeAtMost", "ExpectFtuFlipFlaggedFractionToBeAtMost",
    "WeightedFtaFlaggedFraction", "UnfairMapFlaggedFraction", "FlipTestFlaggedFraction", "FtuFlipFlaggedFraction",
    "WEIGHTED_FTA_METRIC", "UNFAIR_MAP_METRIC", "FLIPTEST_METRIC", "FTU_FLIP_METRIC", "TESTER_PARAMS",
]
