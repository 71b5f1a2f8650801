"""Step 3 of the audit: the target model's quality against the label on both batches (Evidently)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .._files import whole_file
from .._validation import fmt_count
from ..errors import InputError
from ..gate.policy_schema import Policy
from ..inputs.tabular import FeatureSpec
from ..method._batching import as_tensor
from ..method.output import TargetOutput, predict_probability, resolve_output_form
from .results import ClassificationQuality

__all__ = ["classification_quality", "finite_or_none", "value_target_reason"]

logger = logging.getLogger(__name__)

_TARGET, _PREDICTION = "__target__", "__prediction__"  # classification columns (never user names)


def _binary_labels(series: pd.Series, name: str, positive_label: str | None = None) -> tuple[np.ndarray | None, str]:
    if positive_label is not None:          # text labels mapped with the declared positive class
        from ..inputs.labels import encode_labels

        try:
            return encode_labels(series, column=str(series.name), positive_label=positive_label), ""
        except InputError as exc:
            return None, f"{exc} (in the {name})"
    values = pd.to_numeric(series, errors="coerce")
    bad = values.isna() & series.notna()
    if bad.any():
        return None, (f"label column has non-numeric values (e.g. {series[bad].iloc[0]!r}) in the {name}; "
                      "classification quality needs class indices: declare the positive class (policy positive_label, "
                      "CLI --positive-label)")
    return values.to_numpy(), ""


def classification_quality(
    target_model,
    reference: pd.DataFrame,
    current: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None,
    html_path: str | Path | None = None,
) -> ClassificationQuality:
    """Target-model quality (P(y = target_class) vs the label) on both batches, via Evidently.

    Skipped, with the reason, when the policy names no label, a batch lacks it or holds
    non-numeric labels, a batch holds a single class, or the features cannot be encoded.
    Rows with a missing label are left out (counted in the reason's note). For a target that returns a value
    (policy ``target_output = "value"``) the status is ``"not applicable"`` with no metric: ROC-AUC, log loss and
    the 0.5 cut-off read the output as a probability, which a value in its own unit (``[faux] unit``) is not.
    """
    if policy.target_output == "value":
        return ClassificationQuality("not applicable", value_target_reason(policy.faux.unit))
    label = policy.label
    if not label:
        return ClassificationQuality("skipped", "the policy names no label column")
    for name, frame in (("reference", reference), ("current batch", current)):
        if label not in frame.columns:
            return ClassificationQuality("skipped", f"label column '{label}' is absent from the {name}")
    if feature_spec is None:
        return ClassificationQuality("skipped", "no feature columns to score the target model on")
    output = TargetOutput(form=policy.target_output, target_class=policy.target_class)
    parts = {}
    for name, frame in (("reference", reference), ("current batch", current)):
        y, why = _binary_labels(frame[label], name, positive_label=policy.positive_label)
        if y is None:
            return ClassificationQuality("skipped", why)
        keep = ~np.isnan(y)
        target = (y[keep] == policy.target_class).astype(int)
        if len(np.unique(target)) < 2:
            return ClassificationQuality("skipped", f"the {name} holds a single class of '{label}' "
                                                    f"({fmt_count(keep.sum())} labelled rows)")
        try:
            Xt = as_tensor(feature_spec.encode(frame.loc[keep]))
            prob = predict_probability(target_model, Xt, resolve_output_form(target_model, Xt[:256], output))
        except Exception as exc:  # noqa: BLE001 - bad input (InputError) or a model that cannot take X
            return ClassificationQuality("skipped", f"the target model cannot score the {name}: {exc}")
        parts[name] = pd.DataFrame({_TARGET: target, _PREDICTION: prob})
    try:
        metrics, saved = _evidently_classification(parts["reference"], parts["current batch"], html_path)
    except Exception as exc:  # noqa: BLE001 - Evidently failing: logged, the section says 'skipped'
        logger.error("classification quality: Evidently failed: %s", exc)
        return ClassificationQuality("skipped", f"Evidently classification failed: {type(exc).__name__}: {exc}")
    return ClassificationQuality("computed", "", metrics, n_reference=len(parts["reference"]),
                                 n_current=len(parts["current batch"]), html_path=None if saved is None else str(saved))


_CLASSIFICATION_METRICS = {"Accuracy": "accuracy", "Precision": "precision", "Recall": "recall", "F1Score": "f1",
                           "RocAuc": "roc_auc", "LogLoss": "log_loss"}


def _evidently_classification(ref: pd.DataFrame, cur: pd.DataFrame, html_path):
    from evidently import BinaryClassification, DataDefinition, Dataset, Report
    from evidently.presets import ClassificationPreset

    definition = DataDefinition(numerical_columns=[_PREDICTION], categorical_columns=[_TARGET], classification=[
        BinaryClassification(target=_TARGET, prediction_probas=_PREDICTION)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        snapshot = Report([ClassificationPreset()]).run(
            current_data=Dataset.from_pandas(cur, data_definition=definition),
            reference_data=Dataset.from_pandas(ref, data_definition=definition))
        saved = None
        if html_path is not None:
            saved = Path(html_path)
            with whole_file(saved) as tmp:         # whole or absent, as every record
                snapshot.save_html(str(tmp))
    context = snapshot.context
    metrics: dict[str, dict[str, float | None]] = {}
    for metric_id, result in snapshot.metric_results.items():
        payload = result.to_dict()
        head = str(payload.get("metric_name", "")).split("(", 1)[0]
        name = _CLASSIFICATION_METRICS.get(head)
        if name is None:
            continue
        try:
            ref_value = context.get_reference_metric_result(metric_id).to_dict().get("value")
        except BaseException:  # noqa: BLE001 - ReferenceMetricNotFound derives from BaseException
            ref_value = None
        metrics[name] = {"reference": finite_or_none(ref_value), "current": finite_or_none(payload.get("value"))}
    return metrics, saved


def value_target_reason(unit: str | None) -> str:
    """Why classification quality has no number for a target that returns a value in ``unit`` (``[faux] unit``)."""
    return (f"not applicable (value target, unit {unit}): accuracy, ROC-AUC and log loss read the target's output "
            "as a probability of the label's class; a value target's output is in its own unit")


def finite_or_none(value) -> float | None:
    """``value`` as a float, or None when it is missing or not finite."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if np.isfinite(v) else None
