"""Who is audited, and how the protected attribute enters the target: the rows of a check.

:func:`prepare_audit` is the one definition of "who is audited", shared by ``check_one_attribute`` and the
Great Expectations baseline metrics, so that every tester scores the same individuals.
:func:`direct_derivative` gives ∂x/∂c for the protected attribute's own input columns when the
target takes it as an input (the direct term of the LIC score).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .._validation import fmt_count, require_columns
from ..errors import InputError
from ..inputs.column_values import missing_counts, missing_message
from ..inputs.labels import encode_labels, label_like_columns
from ..inputs.protected import ProtectedAttribute, encode_protected
from ..inputs.tabular import FeatureSpec
from ..kinds import protected_kind
from .direct import direct_derivative, encoded_level
from .policy_schema import Policy

__all__ = ["AuditRows", "SOFTMAX_TOLERANCE", "SwapLayout", "check_model_accepts", "check_model_outputs",
           "direct_derivative", "encoded_level", "missing_inputs", "prepare_audit", "swap_layout"]

#: How far a row of declared softmax probabilities may sum from 1 (float32 rounding is ~1e-6 per row;
#: an unnormalised output is off by far more).
SOFTMAX_TOLERANCE = 1e-3


@dataclass(frozen=True)
class AuditRows:
    """The individuals a check audits, encoded (output of :func:`prepare_audit`).

    Attributes
    ----------
    X : ndarray of shape (n, d), float32
        Encoded features of the audited rows.
    protected : ProtectedAttribute
        Encoded over all kept input rows.
    values : ndarray of shape (n,)
        Protected values of the audited rows.
    row_index : ndarray of shape (n,)
        Their input-row positions.
    y_true : ndarray of shape (n,) or None
        Labels, when the policy names a label column.
    feature_spec : FeatureSpec
        The spec used (a passthrough spec when none was given).
    source : DataFrame or None
        The input frame the rows come from (not copied); :attr:`frame` selects the audited rows.
    """

    X: np.ndarray
    protected: ProtectedAttribute
    values: np.ndarray
    row_index: np.ndarray
    y_true: np.ndarray | None
    feature_spec: FeatureSpec
    source: pd.DataFrame | None = None

    @property
    def frame(self) -> pd.DataFrame:
        """The audited rows as given (source columns), in audit order."""
        if self.source is None:
            raise InputError("these audit rows were built without their source frame")
        return self.source.iloc[self.row_index]


def check_levels(feature_spec: FeatureSpec, protected=None, *, max_levels: int) -> None:
    """Refuse a categorical input column, or a multi-class protected attribute, with more than ``max_levels`` levels.

    Every level is one encoded feature (one aux-model output for the protected attribute), so the check's
    memory and time grow with it: a column of ~8,600 levels ran 15 minutes at ~10 GB with no decision.
    Refused before anything is encoded.

    Raises
    ------
    InputError
        Naming each such column, its level count, the limit and the fixes (``[operations] max_levels``, or a
        feature spec that groups rare levels: ``FeatureSpec.fit(..., min_frequency=...)``).
    """
    wide = [(c.name, len(c.levels)) for c in feature_spec.columns
            if c.kind == "categorical" and len(c.levels) > max_levels]
    if protected is not None and protected.kind == "multiclass" and len(protected.groups) > max_levels:
        wide.append((f"{protected.name} (protected)", len(protected.groups)))
    if wide:
        listed = "; ".join(f"column {name!r} has {n:,} levels" for name, n in wide)
        raise InputError(
            f"{listed}: more than the limit of {max_levels:,} levels per categorical column ([operations] max_levels "
            "in the policy); each level is one encoded feature, so such a column takes the check minutes and "
            "gigabytes. Group rare levels in the feature spec (FeatureSpec.fit(..., min_frequency=...) sends them to "
            "'__infrequent__'), encode the column as a number, or raise max_levels; nothing was scored")


def prepare_audit(frame: pd.DataFrame, *, policy: Policy, feature_spec: FeatureSpec | None = None,
                  takes_missing: bool = False) -> AuditRows:
    """Select and encode the rows to audit: missing-protected rule, then the seeded ``max_rows`` sample.

    The one definition of "who is audited", shared by :func:`~faux_checks.gate.one_attribute.check_one_attribute`
    and the Great Expectations baseline metrics so that every tester scores the same individuals.
    With ``takes_missing`` (the target takes NaN: :func:`~faux_checks.inputs.missing.target_takes_missing`)
    the numeric input columns with missing values among the audited rows are encoded with an indicator
    (:meth:`~faux_checks.inputs.tabular.FeatureSpec.with_missing_indicators`; the returned spec is that one).

    Raises
    ------
    InputError
        Empty data, missing columns (named, with what is present), missing protected values
        (column and count), a label column among the features, missing input values (every column
        named with its count, and the fix: :func:`missing_inputs`), or any encoding error.
    """
    if len(frame) == 0:
        raise InputError("the audit data has 0 rows")
    required = [policy.single_protected("the in-memory check")] + ([policy.label] if policy.label else [])
    require_columns(frame, required, what="audit data")
    protected = encode_protected(frame[policy.protected], name=policy.protected, kind=policy.protected_kind,
                                 missing=policy.missing_protected)
    if feature_spec is None:
        feature_spec = FeatureSpec.passthrough(frame, exclude=required)
        _refuse_label_like_inputs(feature_spec, policy)
    elif policy.label and policy.label in feature_spec.source_columns:
        raise InputError(f"the label column '{policy.label}' is one of the target's input columns; "
                         "remove it from the feature spec")
    check_levels(feature_spec, protected, max_levels=policy.operations.max_levels)
    row_index = np.flatnonzero(protected.kept)
    values = protected.values
    if policy.max_rows is not None and len(row_index) > policy.max_rows:
        pick = np.sort(np.random.default_rng(policy.seed).choice(len(row_index), policy.max_rows, replace=False))
        row_index, values = row_index[pick], values[pick]
    feature_spec = missing_inputs(frame.iloc[row_index], feature_spec, policy, takes_missing=takes_missing)
    X = feature_spec.encode(frame.iloc[row_index])
    y_true = (encode_labels(frame[policy.label], column=policy.label, positive_label=policy.positive_label)[row_index]
              if policy.label else None)
    return AuditRows(X=X, protected=protected, values=values, row_index=row_index, y_true=y_true,
                     feature_spec=feature_spec, source=frame)


def missing_inputs(rows: pd.DataFrame, spec: FeatureSpec, policy: Policy, *, takes_missing: bool) -> FeatureSpec:
    """The spec that encodes ``rows``: with an indicator on each numeric input column with missing values when the
    target takes NaN; ``spec`` itself when no input column has missing values.

    Raises
    ------
    InputError
        Missing values the target cannot take: one message naming every such column with its count among the
        audited rows, and the fix (drop or impute them; or declare a target that takes NaN:
        ``missing_values = "pass"``). For a target that takes NaN, a categorical column with missing values
        (its encoding has no level for them), every such column named.
    """
    counts = missing_counts(rows, spec.source_columns)
    if not counts:
        return spec
    what = f"the audit data ({fmt_count(len(rows))} audited rows, FeatureSpec '{spec.name}')"
    kinds = {c.name: c.kind for c in spec.columns}
    if takes_missing:
        text = {c: k for c, k in counts.items() if kinds[c] != "numeric" or k == len(rows)}
        if text:
            raise InputError(missing_message(text, len(rows), what=what, fix=(
                "the target takes NaN, but these columns are categorical (their one-hot encoding has no level for a "
                "missing value) or empty: impute them, or give missing values a level of their own (e.g. 'missing')")))
        return spec.with_missing_indicators(list(counts))
    if policy.missing_values == "refuse":
        fix = "the policy refuses missing values (missing_values = \"refuse\"): drop or impute them before the check"
    else:
        fix = ("the target model is not known to take NaN (PyTorch, ONNX, a scikit-learn model whose tags refuse "
               "NaN): drop or impute them before the check, or, if the model handles NaN itself, declare it with "
               "the policy key missing_values = \"pass\"")
    raise InputError(missing_message(counts, len(rows), what=what, fix=fix))


def _refuse_label_like_inputs(spec: FeatureSpec, policy: Policy) -> None:
    """Without a feature spec, refuse a passthrough input named like a label while the policy declares none."""
    if policy.label:
        return
    suspects = label_like_columns(spec.source_columns)
    if suspects:
        raise InputError(f"column(s) {suspects} look like a label and, with no label declared and no feature spec, "
                         "would become model inputs; declare the label (policy label = \"%s\", CLI --label %s) or "
                         "pass the feature spec the model was trained with (--feature-spec)" % (suspects[0], suspects[0]))


@dataclass(frozen=True)
class SwapLayout:
    """Where the swap reading's policy settings land in the encoded features (:func:`swap_layout`).

    Attributes
    ----------
    keep : ndarray of shape (d,), bool
        The target's features the auxiliary model sees (all but the protected column's own).
    admissible : ndarray of shape (d_aux,), bool
        Encoded features of the policy's admissible columns, in the aux input space.
    categorical_groups : list of ndarray
        Positions (aux input space) of each one-hot group (a missing-value indicator's present/missing pair is one).
    feature_groups : list of ndarray
        Every source column's positions (aux input space): what the informativeness test permutes together
        (a column with a missing-value indicator gives two: its value, and its present/missing pair).
    group_columns : list of str
        The source column of each entry of ``feature_groups``.
    direct_levels : ndarray of shape (m, d_c) or (1, d_c), or None
        When the target takes the protected column: its encoding per group, or (continuous) its change
        per +1 standard deviation of c.
    """

    keep: np.ndarray
    admissible: np.ndarray
    categorical_groups: list
    direct_levels: np.ndarray | None
    feature_groups: list
    group_columns: list


def swap_layout(spec: FeatureSpec, protected: ProtectedAttribute, admissible_columns, *,
                c_std: float = 1.0) -> SwapLayout:
    """Map the policy's admissible columns and the protected column onto the encoded features.

    Parameters
    ----------
    spec : FeatureSpec
    protected : ProtectedAttribute
    admissible_columns : sequence of str
        Source columns (policy ``[faux] admissible``).
    c_std : float
        Standard deviation of a continuous protected attribute (its direct step is one sd).

    Raises
    ------
    InputError
        An admissible column that is not a target input (named, with the inputs), or the protected
        column declared admissible.
    """
    unknown = [col for col in admissible_columns if col not in spec.source_columns]
    if unknown:
        raise InputError(f"admissible column(s) {unknown} are not inputs of the target (FeatureSpec '{spec.name}'); "
                         f"its inputs: {spec.source_columns[:20]}{' ...' if len(spec.source_columns) > 20 else ''}")
    if protected.name in admissible_columns:
        raise InputError(f"the protected attribute '{protected.name}' cannot be admissible")
    mask = spec.feature_mask(protected.name)
    keep = ~mask
    columns = spec.feature_to_column()
    admissible = np.isin(columns, [spec.source_columns.index(col) for col in admissible_columns])[keep]
    positions = np.cumsum(keep) - 1
    groups, feature_groups, group_columns, j = [], [], [], 0
    for enc in spec.columns:
        idx = np.arange(j, j + enc.width)
        if keep[idx].all():
            parts = [idx[:1], idx[1:]] if enc.missing == "indicator" else [idx]
            feature_groups += [positions[part] for part in parts]
            group_columns += [enc.name] * len(parts)
            if enc.kind == "categorical" or enc.missing == "indicator":
                groups.append(positions[parts[-1]])
        j += enc.width
    direct_levels = None
    if mask.any():
        enc = spec.columns[spec.source_columns.index(protected.name)]
        if not protected_kind(protected.kind).grouped:
            direct_levels = np.array([[c_std / (enc.std if enc.std > 0 else 1.0)]])
        else:
            direct_levels = np.stack([encoded_level(enc, g) for g in protected.groups])      # (m, width)
    return SwapLayout(keep=keep, admissible=admissible, categorical_groups=groups, direct_levels=direct_levels,
                      feature_groups=feature_groups, group_columns=group_columns)


def check_model_accepts(model, X: torch.Tensor, spec: FeatureSpec) -> None:
    """Raise InputError unless the target model takes the encoded features (two probe rows)."""
    try:
        with torch.no_grad():
            model(X[:2])
    except Exception as exc:  # noqa: BLE001 - any refusal of X becomes the InputError below
        raise InputError(
            f"the target model does not accept X with {X.shape[1]} encoded features (FeatureSpec '{spec.name}', "
            f"columns {spec.source_columns[:12]}{' ...' if len(spec.source_columns) > 12 else ''}): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}. Pass the feature spec the model was trained with"
        ) from None


def check_model_outputs(model, X: torch.Tensor, output, *, rows: np.ndarray | None = None,
                        scope: str = "audited rows", outcome: str = "Nothing was scored") -> None:
    """Refuse, before scoring, probability outputs that are not probabilities on some audited row.

    ``resolve_output_form`` checks the declared form on a probe of 256 rows; this reads every row
    once (no gradients, in chunks): ``softmax`` rows must lie in [0, 1] and sum to 1 within
    :data:`SOFTMAX_TOLERANCE`, ``probability`` values must lie in [0, 1]. Rows with a non-finite
    output are left to the scorer (their scores are undefined and count as flagged). Other forms
    are not read.

    Parameters
    ----------
    model : torch module or forward-only target
    X : Tensor of shape (n, d)
        The encoded audited rows.
    output : TargetOutput
        The resolved form (:func:`faux_checks.method.output.resolve_output_form`).
    rows : ndarray of shape (n,), optional
        Input-row numbers of ``X``'s rows, for the message (default 0..n−1).
    scope, outcome : str
        The message's words for the rows read (``"of 1,500 audited rows"``) and what became of the run
        (the streaming scorer names the chunk and that no scores file was written).

    Raises
    ------
    InputError
        ``output form 'softmax' ... 312 of 1,500 audited rows do not sum to 1 (within 0.001): e.g.
        input row 4: [0.9, 0.4] (sum 1.3) ...``, with the fix.
    """
    from ..method._batching import DEFAULT_CHUNK, eval_mode, iter_chunks
    from ..method.output import raw_output

    if output.form not in ("softmax", "probability"):
        return
    n, n_bad, first = len(X), 0, None
    with torch.no_grad(), eval_mode(model):
        for chunk in iter_chunks(n, DEFAULT_CHUNK):
            out = raw_output(model, X[chunk].float()).double()               # (b, m)
            finite = torch.isfinite(out).all(dim=1)
            outside = ((out < 0) | (out > 1)).any(dim=1)
            if output.form == "softmax":
                wrong = finite & (outside | ((out.sum(dim=1) - 1).abs() > SOFTMAX_TOLERANCE))
            else:
                wrong = finite & outside
            n_bad += int(wrong.sum())
            if first is None and bool(wrong.any()):
                i = int(torch.nonzero(wrong)[0, 0])
                first = (chunk.start + i, out[i].tolist())
    if not n_bad:
        return
    assert first is not None                        # set at the first wrong row
    at, values = first
    row = int(rows[at]) if rows is not None else at
    shown = "[" + ", ".join(f"{v:.4g}" for v in values[:6]) + (", ..." if len(values) > 6 else "") + "]"
    if output.form == "softmax":
        problem = (f"are not probabilities that sum to 1 (within {SOFTMAX_TOLERANCE:g}): e.g. input row "
                   f"{fmt_count(row)}: {shown}, sum {sum(values):.4g}")
        fix = "declare output form 'logits' for unnormalised class scores, or make the model end with a softmax"
    else:
        problem = f"lie outside [0, 1]: e.g. input row {fmt_count(row)}: {shown}"
        fix = "declare output form 'logit' for log-odds, or make the model end with a sigmoid"
    raise InputError(
        f"output form '{output.form}' (policy target_output, CLI --output-form): the target model's outputs on "
        f"{fmt_count(n_bad)} of {fmt_count(n)} {scope} {problem}; {fix}. {outcome}"
    )
