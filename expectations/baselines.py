"""Baseline testers as Great Expectations expectations (reported next to fAux; ``gating`` opt-in).

- FTA (``faux.fta``): share of individuals whose ‖∇ₓ P(y|x)‖_p exceeds ``threshold``
  (:class:`faux_checks.baselines.FTATester`), at most ``max_flagged_fraction`` (None = report only).
- Weighted FTA, Unfair Map, FlipTest, FTU flip (``faux.weighted_fta``, ``faux.unfair_map``,
  ``faux.fliptest``, ``faux.ftu_flip``): share of individuals whose score exceeds ``threshold``,
  scored by :func:`faux_checks.gate.testers.baseline_scores` (check_one_attribute's numbers), at most
  ``max_flagged_fraction`` (None = report only); "not applicable" (success, observed None) when
  the tester does not fit the target (FTU flip without the protected input, FlipTest with a
  continuous attribute).
- Group metrics (``faux.demographic_parity_difference``, ``faux.equalized_odds_difference``):
  fairlearn's differences on the predictions P(y|x) > 0.5 across protected groups
  (:func:`faux_checks.baselines.group_metrics`), at most ``threshold``.

The metric providers are :mod:`faux_checks_gx.baseline_metrics`; this module holds the expectations that
read them. Each metric depends on the suite's ``faux.check`` metric (the same model, feature spec, aux model and
policy: GX computes it once per validation) and reads the tester's result that ``check_one_attribute`` already
computed on the audited rows (``check["testers"]``): the expectations validate, they do not score
again. Only an expectation whose settings differ from its policy's (a hand-built one), or whose tester
the check did not run, scores the rows itself (``faux_checks_gx._inputs.audit_inputs``, one call into the
tester). Errors surface as ``exception_info`` (suite: ``undecided``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Literal, Optional, Union

import numpy as np
from great_expectations.compatibility import pydantic
from great_expectations.compatibility.typing_extensions import override
from great_expectations.execution_engine import ExecutionEngine
from great_expectations.expectations.expectation import ColumnAggregateExpectation

from faux_checks.gate.tester_table import TESTERS

from .baseline_metrics import (
    DP_METRIC,
    EO_METRIC,
    FLIPTEST_METRIC,
    FTA_METRIC,
    FTU_FLIP_METRIC,
    LINKED_COLUMNS_METRIC,
    UNFAIR_MAP_METRIC,
    WEIGHTED_FTA_METRIC,
    tester_params,
)

__all__ = [# the metric names the expectations read (defined in .baseline_metrics)     "FTA_METRIC", "DP_METRIC",
           "EO_METRIC", "ExpectDemographicParityDifferenceToBeAtMost", "ExpectEqualizedOddsDifferenceToBeAtMost",
           "ExpectFlipTestFlaggedFractionToBeAtMost", "ExpectFtaFlaggedFractionToBeAtMost",
           "ExpectFtuFlipFlaggedFractionToBeAtMost", "ExpectLinkedColumnsFlaggedFractionToBeAtMost",
           "ExpectUnfairMapFlaggedFractionToBeAtMost", "ExpectWeightedFtaFlaggedFractionToBeAtMost",
           "FLIPTEST_METRIC", "FTU_FLIP_METRIC", "KEYS", "LINKED_COLUMNS_METRIC", "TESTER_PARAMS",
           "UNFAIR_MAP_METRIC", "WEIGHTED_FTA_METRIC"]

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
# Weighted FTA, Unfair Map, FlipTest, FTU flip and linked columns: one thin expectation subclass per tester
# (its metric in .baseline_metrics) comparing the share of individuals over ``threshold`` with
# ``max_flagged_fraction``; the shared behaviour is in the bases.

#: Shipped per-individual testers' settings fields (read from the table: faux_checks.gate.tester_table.TESTERS).
TESTER_PARAMS: Dict[str, tuple] = {n: t.params for n, t in TESTERS.items() if t.per_individual and n != "fta"}
MAX_FLAGGED_FRACTION_DESCRIPTION = "Largest allowed share of individuals over threshold; None = report only."


def _default(field: str):
    return TESTERS["fta"].settings.model_fields[field].default     # the shipped testers' settings model


class TesterFlaggedFractionExpectation(_BaselineExpectation):
    """Shared by the per-individual tester expectations (abstract: no metric, not registered).

    ``observed_value`` = share of audited individuals whose score exceeds ``threshold``; success
    when it is at most ``max_flagged_fraction`` (always, when that is None: report only). A tester
    that does not apply to the target (e.g. FTU flip of a target without the protected input) is
    a success with ``observed_value`` None and the reason in ``details.not_applicable``, as in
    ``check_one_attribute``'s report.
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
                   gating=settings.gating, **{k: getattr(settings, k) for k in tester_params(cls._tester)})

    @override
    def _validate(self, metrics: Dict, runtime_configuration: Optional[dict] = None,
                  execution_engine: Optional[ExecutionEngine] = None) -> Dict[str, Any]:
        summary = metrics.get(self._metric)
        if isinstance(summary, dict) and summary.get("not_applicable"):
            return {"success": True, "result": {"observed_value": None, "details": {
                **summary, "limit": self.max_flagged_fraction, "gating": self.gating}}}
        return super()._validate(metrics, runtime_configuration, execution_engine)


KEYS = ("model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold", "max_flagged_fraction",
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
    success_keys = KEYS + TESTER_PARAMS["weighted_fta"]
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
    success_keys = KEYS + TESTER_PARAMS["unfair_map"]
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
    success_keys = KEYS + TESTER_PARAMS["fliptest"]
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
    success_keys = KEYS
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
    success_keys = KEYS
    args_keys = ("column",) + success_keys
    _metric: ClassVar[str] = LINKED_COLUMNS_METRIC
    _tester: ClassVar[str] = "linked_columns"
