"""The fAux individual-fairness check and the library's gate as Great Expectations expectations.

``faux.check`` (metric provider) makes one call into :func:`faux_checks.gate.one_attribute.check_one_attribute` on the
whole batch and returns ``CheckResult.to_dict()``; :class:`ExpectFauxFlaggedFractionToBeAtMost`
succeeds when that check's decision is ``"passed"``. ``faux.gate`` reads every attribute's ``faux.check`` (the
same metrics, computed once) and returns the library's decision over them all
(:func:`faux_checks.gate.attributes.gate_of_checks`); :class:`ExpectFauxGateToPass` records it and succeeds
when it is ``"passed"``. Modelled on GX's ``expect_column_mean_to_be_between`` / ``column_mean``
(docs/architecture.md, "Adapters stay thin").
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Optional, Union

from great_expectations.compatibility import pydantic
from great_expectations.compatibility.typing_extensions import override
from great_expectations.execution_engine import ExecutionEngine, PandasExecutionEngine
from great_expectations.expectations.expectation import BatchExpectation, ColumnAggregateExpectation
from great_expectations.expectations.metrics.column_aggregate_metric_provider import ColumnAggregateMetricProvider
from great_expectations.expectations.metrics.metric_provider import metric_value
from great_expectations.expectations.metrics.table_metric_provider import TableMetricProvider
from great_expectations.validator.metric_configuration import MetricConfiguration

from faux_checks.gate.policy import Policy

from ._inputs import cached_model, table_records

__all__ = ["ExpectFauxFlaggedFractionToBeAtMost", "ExpectFauxGateToPass", "FauxCheck", "FauxGate", "FAUX_METRIC",
           "GATE_METRIC", "anchor_column", "check_batch"]

FAUX_METRIC = "faux.check"
GATE_METRIC = "faux.gate"

EXPECTATION_SHORT_DESCRIPTION = (
    "Expect the share of individuals flagged by the fAux individual-fairness test (LIC score > δ) "
    "to be at most the policy's max_flagged_fraction, with an auxiliary model good enough to decide."
)
COLUMN_DESCRIPTION = ("The batch column that anchors the check (anchor_column: the protected attribute column, or "
                      "with [protected_probabilities] the first group's probability column); the check reads the "
                      "whole table.")
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


def anchor_column(policy: Policy) -> str:
    """The batch column the fAux expectation's domain names: the policy's protected column, or with
    ``[protected_probabilities]`` (the batch holds no c) the first group's probability column.

    Parameters
    ----------
    policy : Policy
        A single-attribute policy (:meth:`Policy.attribute_policies`).

    Returns
    -------
    str
        A column name of the validated batch.
    """
    settings = policy.protected_probabilities
    if settings is not None:
        return next(iter(settings.groups.values()))
    return str(policy.protected)


def check_batch(frame, policy: Policy, *, model_path: str, feature_spec_path: str | None = None,
                aux_model_path: str | None = None):
    """The library's check of one protected attribute on the whole batch, in the form c has.

    c a column of the batch: :func:`faux_checks.gate.one_attribute.check_one_attribute`. c given as per-row
    probabilities (``[protected_probabilities]``, no c column): :func:`faux_checks.gate.estimated.check_estimated`
    (multiple imputation, Rubin's rules, the sharpness rule), the same call ``faux-checks check`` makes; the
    probability columns are dropped before the target model is fed.

    Parameters
    ----------
    frame : DataFrame of shape (n, any)
        The batch.
    policy : Policy
        A single-attribute policy.
    model_path, feature_spec_path, aux_model_path : str
        As the expectation's kwargs.

    Returns
    -------
    CheckResult

    Raises
    ------
    InputError, ConfigurationError
        The library's (bad rows, probabilities that do not sum to 1, a given auxiliary model with probabilities):
        GX records them as the expectation's exception, and the suite is undecided.
    """
    from faux_checks.inputs.tabular import FeatureSpec

    spec = FeatureSpec.load(feature_spec_path) if feature_spec_path else None
    model = cached_model(model_path)
    if policy.protected_probabilities is not None:
        from faux_checks.gate.estimated import check_estimated

        given = {str(policy.protected): cached_model(aux_model_path)} if aux_model_path else None
        return check_estimated(model, frame, policy=policy, feature_spec=spec, aux_models=given).sections[0].check
    from faux_checks.gate.one_attribute import check_one_attribute

    return check_one_attribute(model, frame, policy=policy, feature_spec=spec,
                               aux_model=cached_model(aux_model_path) if aux_model_path else None)


class FauxCheck(ColumnAggregateMetricProvider):
    """``faux.check``: :func:`check_batch` (the library's check on the whole batch) as a JSON-ready dict."""

    metric_name = FAUX_METRIC
    value_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json")

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(cls, execution_engine, metric_domain_kwargs: dict, metric_value_kwargs: dict,
                metrics: dict[str, Any], runtime_configuration: dict) -> dict:
        from faux_checks.report.records import record_check

        result = check_batch(table_records(execution_engine, metric_domain_kwargs),
                             Policy.model_validate_json(metric_value_kwargs["policy_json"]),
                             model_path=metric_value_kwargs["model_path"],
                             feature_spec_path=metric_value_kwargs.get("feature_spec_path"),
                             aux_model_path=metric_value_kwargs.get("aux_model_path"))
        record_check(result)  # scores, per-group metrics, aux model: only inside records.recording(...) (the gate flow)
        return result.to_dict()


class ExpectFauxFlaggedFractionToBeAtMost(ColumnAggregateExpectation):
    __doc__ = f"""{EXPECTATION_SHORT_DESCRIPTION}

    Runs the whole fAux gate (:func:`check_batch`: :func:`faux_checks.gate.one_attribute.check_one_attribute`, or
    with ``[protected_probabilities]`` :func:`faux_checks.gate.estimated.check_estimated`) once on the batch; success
    is the check's decision being ``"passed"``. A weak auxiliary model, too many undefined scores, or probabilities
    too blunt to pass make the check ``undecided``, which is not a success either.

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
        aux quality with its intervals, per-group stats, the top flagged individuals, ``protected_form`` (the
        sentence on the form c had, :func:`faux_checks.report.protected_form.protected_form_line`) and the full
        ``CheckResult.to_dict()`` under ``"check"``. With ``[protected_probabilities]`` the interval is Rubin's
        combination (its ``draws``: each draw's flagged fraction) and ``imputation`` holds the draws' seeds, the
        per-draw fractions, the between-draw variance and the sharpness (``expected_auc``, ``min_sharpness``).

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
        if anchor_column(policy) != values["column"]:
            raise ValueError(f"column '{values['column']}' differs from the policy's anchor column "
                             f"'{anchor_column(policy)}' (its protected column, or with [protected_probabilities] "
                             "the first group's probability column); rebuild the suite from the policy")
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
        from faux_checks.report.protected_form import protected_form_line

        details = {k: check.get(k) for k in SUMMARY_KEYS}
        provenance = check.get("provenance") or {}
        details["protected_form"] = protected_form_line(provenance)
        if provenance.get("protected_probabilities"):
            details["imputation"] = provenance["protected_probabilities"]
        details["check"] = check
        return {"success": check.get("decision") == "passed",
                "result": {"observed_value": check.get("flagged_fraction"), "details": details}}


GATE_POLICY_DESCRIPTION = "The whole gate policy as JSON (every protected attribute; Policy.model_dump_json())."


class FauxGate(TableMetricProvider):
    """``faux.gate``: the library's decision over every protected attribute of the policy, as a JSON-ready dict.

    Depends on each attribute's ``faux.check`` with the fAux expectation's exact domain and value kwargs (its
    single-attribute policy, :meth:`Policy.attribute_policies`), so GX runs each check once for both; the
    value is :func:`faux_checks.gate.attributes.gate_of_checks` of those checks (a check that raised makes
    this metric raise too: the suite is then ``undecided``).
    """

    metric_name = GATE_METRIC
    value_keys = FauxCheck.value_keys

    @classmethod
    @override
    def _get_evaluation_dependencies(cls, metric: MetricConfiguration, configuration=None, execution_engine=None,
                                     runtime_configuration: Optional[dict] = None):
        dependencies = super()._get_evaluation_dependencies(
            metric=metric, configuration=configuration, execution_engine=execution_engine,
            runtime_configuration=runtime_configuration)
        kw = metric.metric_value_kwargs or {}
        table = {k: v for k, v in (metric.metric_domain_kwargs or {}).items() if k != "column"}
        for name, one in Policy.model_validate_json(kw["policy_json"]).attribute_policies().items():
            dependencies[f"{FAUX_METRIC}:{name}"] = MetricConfiguration(
                metric_name=FAUX_METRIC,
                metric_domain_kwargs={k: anchor_column(one) if k == "column" else table.get(k)
                                      for k in FauxCheck.domain_keys},
                metric_value_kwargs={**{k: kw.get(k) for k in FauxCheck.value_keys}, "policy_json": one.model_dump_json()})
        return dependencies

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(cls, execution_engine, metric_domain_kwargs: dict, metric_value_kwargs: dict,
                metrics: dict[str, Any], runtime_configuration: dict) -> dict:
        from faux_checks.gate.attributes import gate_of_checks

        policy = Policy.model_validate_json(metric_value_kwargs["policy_json"])
        checks = {name: metrics.get(f"{FAUX_METRIC}:{name}") for name in policy.attribute_names}
        return gate_of_checks(policy, table_records(execution_engine, metric_domain_kwargs), checks)


class ExpectFauxGateToPass(BatchExpectation):
    __doc__ = f"""Expect the library's gate over every protected attribute of the policy to pass.

    Records the decision of :func:`faux_checks.gate.attributes.gate_of_checks` over the suite's fAux checks
    (one per attribute: the decision :func:`faux_checks.gate.attributes.check_attributes` takes); success is
    that decision being ``"passed"``.

    Args:
        model_path (str): {MODEL_PATH_DESCRIPTION}
        feature_spec_path (str or None): {FEATURE_SPEC_PATH_DESCRIPTION}
        aux_model_path (str or None): {AUX_MODEL_PATH_DESCRIPTION}
        policy_json (str): {GATE_POLICY_DESCRIPTION}

    Returns:
        ``observed_value`` = the decision; ``details`` holds ``decision``, ``reasons``, ``rules`` and
        ``attributes`` (one section per attribute) under ``"gate"``.

    Notes:
        Castiglione et al. 2022, fAux (arXiv 2210.06288). A metric that raised surfaces as the expectation's
        ``exception_info``; the suite's decision is then ``undecided`` (faux_checks_gx.suite.validate_frame).
    """

    model_path: str = pydantic.Field(min_length=1, description=MODEL_PATH_DESCRIPTION)
    feature_spec_path: Optional[str] = pydantic.Field(None, description=FEATURE_SPEC_PATH_DESCRIPTION)
    aux_model_path: Optional[str] = pydantic.Field(None, description=AUX_MODEL_PATH_DESCRIPTION)
    policy_json: str = pydantic.Field(min_length=2, description=GATE_POLICY_DESCRIPTION)

    library_metadata: ClassVar[Dict[str, Union[str, list, bool]]] = ExpectFauxFlaggedFractionToBeAtMost.library_metadata
    _library_metadata = library_metadata

    metric_dependencies = (GATE_METRIC,)
    success_keys = ("model_path", "feature_spec_path", "aux_model_path", "policy_json")
    args_keys = success_keys

    @override
    def _validate(self, metrics: Dict, runtime_configuration: Optional[dict] = None,
                  execution_engine: Optional[ExecutionEngine] = None) -> Dict[str, Any]:
        gate = metrics.get(GATE_METRIC)
        if not isinstance(gate, dict):
            return {"success": False, "result": {"observed_value": None, "details": {
                "metric_missing": True, "decision": "undecided",
                "reasons": [f"metric {GATE_METRIC} was not computed"]}}}
        return {"success": gate.get("decision") == "passed",
                "result": {"observed_value": gate.get("decision"), "details": {"gate": gate}}}
