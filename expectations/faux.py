"""The fAux individual-fairness check as a Great Expectations expectation.

``faux.check`` (metric provider) makes one call into :func:`faux_checks.gate.one_attribute.check_one_attribute` on the
whole batch and returns ``CheckResult.to_dict()``; :class:`ExpectFauxFlaggedFractionToBeAtMost`
succeeds when that check's decision is ``"passed"``. Modelled on GX's
``expect_column_mean_to_be_between`` / ``column_mean`` (docs/architecture.md, "Adapters stay thin").
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Optional, Union

from great_expectations.compatibility import pydantic
from great_expectations.compatibility.typing_extensions import override
from great_expectations.execution_engine import ExecutionEngine, PandasExecutionEngine
from great_expectations.expectations.expectation import ColumnAggregateExpectation
from great_expectations.expectations.metrics.column_aggregate_metric_provider import ColumnAggregateMetricProvider
from great_expectations.expectations.metrics.metric_provider import metric_value

from faux_checks.gate.policy import Policy

from ._inputs import cached_model, table_records

__all__ = ["ExpectFauxFlaggedFractionToBeAtMost", "FauxCheck", "FAUX_METRIC"]

FAUX_METRIC = "faux.check"

EXPECTATION_SHORT_DESCRIPTION = (
    "Expect the share of individuals flagged by the fAux individual-fairness test (LIC score > δ) "
    "to be at most the policy's max_flagged_fraction, with an auxiliary model good enough to decide."
)
COLUMN_DESCRIPTION = "The protected attribute column (policy 'protected'); the check reads the whole table."
MODEL_PATH_DESCRIPTION = "Path of the target model (TorchScript or torch.export; never unpickled)."
FEATURE_SPEC_PATH_DESCRIPTION = (
    "Path of the FeatureSpec JSON the target model was trained with; None = numeric columns as they are."
)
AUX_MODEL_PATH_DESCRIPTION = "Path of a given auxiliary model; None = trained on the audit rows (seeded)."
POLICY_JSON_DESCRIPTION = "The gate policy as JSON (faux_checks.gate.policy.Policy.model_dump_json())."
MAX_FLAGGED_FRACTION_DESCRIPTION = (
    "Largest allowed share of flagged individuals; must equal the policy's faux.max_flagged_fraction."
)
SUMMARY_KEYS = ("decision", "reasons", "flagged_fraction", "flagged_fraction_defined", "interval", "max_flagged_fraction",
                "delta", "n_individuals", "n_flagged", "n_undefined", "n_missing_protected", "aux_quality",
                "aux_quality_metric", "aux_intervals", "group_rows", "rules", "top_flagged", "by_group")


class FauxCheck(ColumnAggregateMetricProvider):
    """``faux.check``: ``check_one_attribute(model, whole batch, policy=...)`` as a JSON-ready dict."""

    metric_name = FAUX_METRIC
    value_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json")

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(cls, execution_engine, metric_domain_kwargs: dict, metric_value_kwargs: dict,
                metrics: dict[str, Any], runtime_configuration: dict) -> dict:
        from faux_checks.gate.one_attribute import check_one_attribute
        from faux_checks.inputs.tabular import FeatureSpec

        frame = table_records(execution_engine, metric_domain_kwargs)
        spec_path = metric_value_kwargs.get("feature_spec_path")
        aux_path = metric_value_kwargs.get("aux_model_path")
        from faux_checks.report.records import record_check

        result = check_one_attribute(
            cached_model(metric_value_kwargs["model_path"]),
            frame,
            policy=Policy.model_validate_json(metric_value_kwargs["policy_json"]),
            feature_spec=FeatureSpec.load(spec_path) if spec_path else None,
            aux_model=cached_model(aux_path) if aux_path else None,
        )
        record_check(result)  # scores, per-group metrics, aux model: only inside records.recording(...) (the gate flow)
        return result.to_dict()


class ExpectFauxFlaggedFractionToBeAtMost(ColumnAggregateExpectation):
    __doc__ = f"""{EXPECTATION_SHORT_DESCRIPTION}

    Runs the whole fAux gate (:func:`faux_checks.gate.one_attribute.check_one_attribute`) once on the batch; success is
    the check's decision being ``"passed"``. A weak auxiliary model or too many undefined scores
    make the check ``undecided``, which is not a success either.

    Args:
        column (str): {COLUMN_DESCRIPTION}
        model_path (str): {MODEL_PATH_DESCRIPTION}
        feature_spec_path (str or None): {FEATURE_SPEC_PATH_DESCRIPTION}
        aux_model_path (str or None): {AUX_MODEL_PATH_DESCRIPTION}
        policy_json (str): {POLICY_JSON_DESCRIPTION}
        max_flagged_fraction (float): {MAX_FLAGGED_FRACTION_DESCRIPTION}

    Returns:
        ``observed_value`` = the flagged fraction, an undefined score counted as flagged (None
        when not computed); ``details`` holds the decision, reasons, the rules with their status,
        the fraction's ``interval`` (lower, upper, confidence, the spread across aux seeds), counts,
        aux quality with its intervals, per-group stats, the top flagged individuals and the full
        ``CheckResult.to_dict()`` under ``"check"``.

    Notes:
        Castiglione et al. 2022, fAux (arXiv 2210.06288). Any error in the metric (bad input,
        unsafe model file) surfaces as the expectation's ``exception_info``; the suite's
        decision is then ``undecided`` (faux_checks_gx.suite.validate_frame).
    """

    column: str = pydantic.Field(min_length=1, description=COLUMN_DESCRIPTION)
    model_path: str = pydantic.Field(min_length=1, description=MODEL_PATH_DESCRIPTION)
    feature_spec_path: Optional[str] = pydantic.Field(None, description=FEATURE_SPEC_PATH_DESCRIPTION)
    aux_model_path: Optional[str] = pydantic.Field(None, description=AUX_MODEL_PATH_DESCRIPTION)
    policy_json: str = pydantic.Field(min_length=2, description=POLICY_JSON_DESCRIPTION)
    max_flagged_fraction: float = pydantic.Field(ge=0, le=1, description=MAX_FLAGGED_FRACTION_DESCRIPTION)

    library_metadata: ClassVar[Dict[str, Union[str, list, bool]]] = {
        "maturity": "experimental",
        "tags": ["fairness", "individual fairness", "faux-checks"],
        "contributors": ["faux-checks"],
        "requirements": ["faux-checks", "torch"],
        "has_full_test_suite": True,
        "manually_reviewed_code": True,
    }
    _library_metadata = library_metadata

    metric_dependencies = (FAUX_METRIC,)
    success_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json", "max_flagged_fraction")
    args_keys = ("column", "model_path", "feature_spec_path", "aux_model_path", "policy_json", "max_flagged_fraction")

    @pydantic.root_validator(skip_on_failure=True)
    def _policy_agrees(cls, values: dict) -> dict:
        try:
            policy = Policy.model_validate_json(values["policy_json"])
        except Exception as exc:  # noqa: BLE001 - pydantic v2 ValidationError / JSON error
            raise ValueError(f"policy_json is not a valid faux-checks policy: {exc}") from None
        if policy.protected != values["column"]:
            raise ValueError(f"column '{values['column']}' differs from the policy's protected '{policy.protected}'")
        if policy.faux.max_flagged_fraction != values["max_flagged_fraction"]:
            raise ValueError(
                f"max_flagged_fraction {values['max_flagged_fraction']} differs from the policy's "
                f"faux.max_flagged_fraction {policy.faux.max_flagged_fraction}; rebuild the suite from the policy"
            )
        return values

    @override
    def _validate(self, metrics: Dict, runtime_configuration: Optional[dict] = None,
                  execution_engine: Optional[ExecutionEngine] = None) -> Dict[str, Any]:
        check = metrics.get(FAUX_METRIC)
        if not isinstance(check, dict):
            return {"success": False, "result": {"observed_value": None, "details": {
                "metric_missing": True, "decision": "undecided",
                "reasons": [f"metric {FAUX_METRIC} was not computed"]}}}
        details = {k: check.get(k) for k in SUMMARY_KEYS}
        details["check"] = check
        return {"success": check.get("decision") == "passed",
                "result": {"observed_value": check.get("flagged_fraction"), "details": details}}
