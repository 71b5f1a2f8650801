"""The baseline testers' Great Expectations metric providers: each metric's value on the audited rows.

``faux.fta``, ``faux.weighted_fta``, ``faux.unfair_map``, ``faux.fliptest``, ``faux.ftu_flip``,
``faux.linked_columns`` (share of individuals whose score exceeds ``threshold``) and
``faux.demographic_parity_difference``, ``faux.equalized_odds_difference`` (fairlearn's differences on the
predictions P(y|x) > 0.5 across protected groups). Each depends on the suite's ``faux.check`` metric (GX
computes it once per validation) and reads the tester's result that ``check_one_attribute`` already computed
(``check["testers"]``); only a metric whose settings differ from its policy's, or whose tester the check did
not run, scores the rows itself (``faux_checks_gx._inputs.audit_inputs``, one call into the tester). The
expectations that read these metrics are :mod:`faux_checks_gx.baselines`. Split out of it.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from great_expectations.compatibility.typing_extensions import override
from great_expectations.execution_engine import PandasExecutionEngine
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

__all__ = ["tester_params", "DemographicParityDifference", "DP_METRIC", "EO_METRIC", "EqualizedOddsDifference", "FLIPTEST_METRIC",
           "FlipTestFlaggedFraction", "FTA_METRIC", "FtaFlaggedFraction", "FTU_FLIP_METRIC",
           "FtuFlipFlaggedFraction", "LINKED_COLUMNS_METRIC", "LinkedColumnsFlaggedFraction",
           "tester_metric_provider", "UNFAIR_MAP_METRIC", "UnfairMapFlaggedFraction", "WEIGHTED_FTA_METRIC",
           "WeightedFtaFlaggedFraction"]

FTA_METRIC = "faux.fta"
DP_METRIC = "faux.demographic_parity_difference"
EO_METRIC = "faux.equalized_odds_difference"
WEIGHTED_FTA_METRIC = "faux.weighted_fta"
UNFAIR_MAP_METRIC = "faux.unfair_map"
FLIPTEST_METRIC = "faux.fliptest"
FTU_FLIP_METRIC = "faux.ftu_flip"
LINKED_COLUMNS_METRIC = "faux.linked_columns"


def tester_params(tester: str) -> tuple:  # the settings fields the entry reads beyond threshold (the live table)
    return TESTERS[tester].params


_COMMON_VALUE_KEYS = ("model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold")


class _ReadsTheCheck(ColumnAggregateMetricProvider):
    """Base of the baseline metrics: each depends on the suite's ``faux.check`` (computed once per validation).

    The dependency has the fAux expectation's exact domain and value kwargs (model, feature spec, aux model,
    policy), so GX resolves one ``check_one_attribute`` for the fAux expectation and every baseline metric.
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
    """(the check, its entry for ``tester``) when ``check_one_attribute`` computed it with this metric's settings, else None.

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
               **{k: kw.get(k) for k in params}, "n_individuals": int(check["n_individuals"]), "source": "check_one_attribute"}
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
                "groups": sorted(str(g.get("group")) for g in check.get("by_group") or []), "source": "check_one_attribute"}
    inputs = audit_inputs(table_records(execution_engine, metric_domain_kwargs), model_path=kw["model_path"],
                          feature_spec_path=kw.get("feature_spec_path"), policy_json=kw["policy_json"])
    policy = inputs.policy
    if policy.target_output == "value":           # a value target has no probability to cut at 0.5
        from faux_checks.gate.tester_table import value_not_applicable

        return {"statistic": key, "value": None, "not_applicable": value_not_applicable(TESTERS[tester])}
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


# ---------------------------------------------------------------------------------- per-individual testers
# Weighted FTA, Unfair Map, FlipTest, FTU flip and linked columns: each scores the audited rows with
# faux_checks.gate.testers.baseline_scores (the function check_one_attribute uses), summarised against ``threshold``.
# One metric provider per tester, built by tester_metric_provider (expectations/testers.py builds one for
# a tester registered without a shipped class).
def _tester_flagged_fraction(tester: str, execution_engine, metric_domain_kwargs: dict, kw: dict) -> dict:
    """Scores of ``tester`` on the audited rows, summarised against ``threshold`` (check_one_attribute's numbers)."""
    from faux_checks.gate.testers import baseline_scores

    inputs = audit_inputs(table_records(execution_engine, metric_domain_kwargs), model_path=kw["model_path"],
                          feature_spec_path=kw.get("feature_spec_path"), policy_json=kw["policy_json"])
    policy = inputs.policy
    params = {k: kw[k] for k in tester_params(tester) if kw.get(k) is not None}
    settings = TESTERS[tester].settings(threshold=float(kw["threshold"]), **params)
    rows = inputs.rows
    output = resolve_output_form(inputs.target_model, as_tensor(rows.X[:256]),
                                 TargetOutput(form=policy.target_output, target_class=policy.target_class))
    scores, description = baseline_scores(tester, settings, inputs.target_model, output, rows, seed=policy.seed,
                                          links=policy.linked_columns)
    summary = {"statistic": "flagged_fraction", "tester": tester, "threshold": settings.threshold,
               **{k: getattr(settings, k) for k in tester_params(tester)}, "n_individuals": int(len(rows.X))}
    if scores is None:
        return {**summary, "value": None, "not_applicable": description}
    flagged = scores > settings.threshold
    return {**summary, "value": float(np.mean(flagged)), "n_flagged": int(flagged.sum()), "rule": description,
            "p50": float(np.median(scores)), "p90": float(np.quantile(scores, 0.9))}


def tester_metric_provider(class_name: str, tester: str, metric_name: str, doc: str) -> type:
    """One metric provider per per-individual tester: ``_tester_flagged_fraction`` on the audited rows.

    Defining the class registers the metric with Great Expectations (its metaclass), as a class
    statement would.
    """

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(cls, execution_engine, metric_domain_kwargs: dict, metric_value_kwargs: dict,
                metrics: dict[str, Any], runtime_configuration: dict) -> dict:
        reused = _flagged_from_check(metrics, tester, metric_value_kwargs, tester_params(tester))
        if reused is not None:
            return reused
        return _tester_flagged_fraction(tester, execution_engine, metric_domain_kwargs, metric_value_kwargs)

    return type(class_name, (_ReadsTheCheck,), {
        "__doc__": doc, "__module__": __name__, "metric_name": metric_name,
        "value_keys": _COMMON_VALUE_KEYS + tester_params(tester), "_pandas": _pandas})


WeightedFtaFlaggedFraction = tester_metric_provider(
    "WeightedFtaFlaggedFraction", "weighted_fta", WEIGHTED_FTA_METRIC,
    "``faux.weighted_fta``: ‖P_S ∇f‖_p of the audited rows against ``threshold``.")
UnfairMapFlaggedFraction = tester_metric_provider(
    "UnfairMapFlaggedFraction", "unfair_map", UNFAIR_MAP_METRIC,
    "``faux.unfair_map``: Unfair Map loss ratio of the audited rows against ``threshold``.")
FlipTestFlaggedFraction = tester_metric_provider(
    "FlipTestFlaggedFraction", "fliptest", FLIPTEST_METRIC,
    "``faux.fliptest``: FlipTest output change of the audited rows against ``threshold``.")
FtuFlipFlaggedFraction = tester_metric_provider(
    "FtuFlipFlaggedFraction", "ftu_flip", FTU_FLIP_METRIC,
    "``faux.ftu_flip``: FTU flip output change of the audited rows against ``threshold``.")
LinkedColumnsFlaggedFraction = tester_metric_provider(
    "LinkedColumnsFlaggedFraction", "linked_columns", LINKED_COLUMNS_METRIC,
    "``faux.linked_columns``: |Δŷ| under the policy's linked-columns counterfactual against ``threshold``.")
