"""The one place that wires the pieces into a gate decision: :func:`run_check` -> :class:`CheckResult`.

Decision rule (in this order; the first that applies wins):

1. ``undecided`` when the auxiliary model's held-out quality is below ``min_aux_quality`` (or
   unknown): fAux's estimate of ∂x/∂c is only as good as f_aux (the paper's RQ4);
2. ``undecided`` when more than ``max_undefined_fraction`` of the scores are undefined, or
   none is defined (a non-finite score is undefined, never "not flagged");
3. ``failed`` when the flagged fraction (LIC score > δ, over defined scores) exceeds
   ``max_flagged_fraction``, or a baseline tester marked ``gating`` exceeds its limit;
4. ``passed`` otherwise.

Bad input raises :class:`~faux_checks.errors.InputError` (the CLI exits 2); adapters turn any
exception into an ``undecided`` result with :meth:`CheckResult.undecided`. Nothing here passes
by accident.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from ._validation import as_frame, fmt_count, require_columns
from .errors import InputError
from .inputs.protected import ProtectedAttribute, encode_protected
from .inputs.tabular import ColumnEncoding, FeatureSpec
from .method._batching import as_tensor
from .method.auxiliary import AuxiliaryModel
from .method.faux import FAuxTester, LICResult
from .method.output import TargetOutput, resolve_output_form
from .policy import Policy, TesterSettings
from .provenance import data_sha256, jsonable, package_versions, utc_now

__all__ = ["AuditRows", "CheckResult", "prepare_audit", "run_check", "SCHEMA_VERSION", "delta_curve"]

SCHEMA_VERSION = "1.0"
Decision = str  # "passed" | "failed" | "undecided"
EXIT_CODES = {"passed": 0, "failed": 1, "undecided": 2}


def summary_line(result) -> str:
    """One-line outcome of a check-like result: "failed: 7.2% flagged > 5.0% at δ=0.05, n=10,000".

    ``result`` needs ``decision``, ``reasons``, ``flagged_fraction``, ``max_flagged_fraction``,
    ``delta`` and ``n_individuals`` (a :class:`CheckResult` or a streaming summary).
    """
    if result.decision == "undecided":
        return f"undecided: {result.reasons[0] if result.reasons else 'no reason recorded'}"
    op = ">" if result.flagged_fraction > result.max_flagged_fraction else "<="
    return (f"{result.decision}: {result.flagged_fraction:.1%} flagged {op} {result.max_flagged_fraction:.1%} "
            f"at δ={result.delta:g}, n={result.n_individuals:,}")


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one fairness check, computed eagerly and then read-only.

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
        The rule that produced the decision first, then notes.
    flagged_fraction : float
        Share of individuals with a defined LIC score above ``delta`` (NaN when not computed).
    max_flagged_fraction, delta : float
        From the policy.
    n_individuals, n_undefined, n_missing_protected : int
        Audited rows; rows with an undefined score; rows dropped for a missing protected value.
    by_group : DataFrame or None
        Per protected group: ``n``, ``flagged``, ``flagged_fraction``, ``undefined``,
        ``mean_score``, ``p90_score``.
    aux_quality : float
        Held-out ROC-AUC / macro AUC / R² of the auxiliary model (``aux_quality_metric``).
    evidence : DataFrame or None
        Shape (n_individuals, n_source_columns): per-feature evidence summed to source columns.
    testers : dict
        Baseline testers' summaries (name -> dict with the statistic and its limit).
    provenance : dict
        Model/data/policy hashes, seed, settings and package versions.
    scores : ndarray of shape (n_input_rows,) or None
        LIC score per input row, in input order; NaN for rows not audited or undefined.
    row_index : ndarray of shape (n_individuals,) or None
        Input-row positions of the audited individuals.
    """

    decision: Decision
    reasons: list[str]
    flagged_fraction: float
    max_flagged_fraction: float
    delta: float
    n_individuals: int = 0
    n_undefined: int = 0
    n_missing_protected: int = 0
    by_group: pd.DataFrame | None = None
    aux_quality: float = float("nan")
    aux_quality_metric: str = ""
    evidence: pd.DataFrame | None = None
    testers: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    scores: np.ndarray | None = None
    row_index: np.ndarray | None = None
    uses_protected_directly: bool = False
    top_flagged: list[dict] = field(default_factory=list)
    curve: dict[str, list[float]] = field(default_factory=dict)
    aux_roc: dict[str, list[float]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 passed, 1 failed, 2 undecided (DESIGN.md contract)."""
        return EXIT_CODES[self.decision]

    @classmethod
    def undecided(cls, reason: str, *, delta: float = float("nan"), max_flagged_fraction: float = float("nan"),
                  provenance: dict | None = None) -> "CheckResult":
        """A result for a check that could not be computed (never a pass)."""
        return cls(decision="undecided", reasons=[reason], flagged_fraction=float("nan"),
                   max_flagged_fraction=max_flagged_fraction, delta=delta, provenance=provenance or {})

    def __repr__(self) -> str:
        return summary_line(self)

    def to_dict(self) -> dict:
        """JSON-ready dict with ``schema_version``; NaN becomes None."""
        return jsonable({
            "schema_version": SCHEMA_VERSION,
            "decision": self.decision,
            "exit_code": self.exit_code,
            "reasons": self.reasons,
            "flagged_fraction": self.flagged_fraction,
            "max_flagged_fraction": self.max_flagged_fraction,
            "delta": self.delta,
            "n_individuals": self.n_individuals,
            "n_undefined": self.n_undefined,
            "n_missing_protected": self.n_missing_protected,
            "uses_protected_directly": self.uses_protected_directly,
            "aux_quality": self.aux_quality,
            "aux_quality_metric": self.aux_quality_metric,
            "by_group": None if self.by_group is None else self.by_group.reset_index().to_dict(orient="records"),
            "testers": self.testers,
            "top_flagged": self.top_flagged,
            "evidence_summary": self.evidence_summary(),
            "flagged_fraction_vs_delta": self.curve,
            "score_histogram": self.score_histogram(),
            "aux_roc": self.aux_roc,
            "provenance": self.provenance,
        })

    def to_json(self, **kwargs) -> str:
        """``json.dumps(self.to_dict())``."""
        return json.dumps(self.to_dict(), **{"indent": 2, **kwargs})

    def flagged(self) -> np.ndarray | None:
        """Bool array (n_input_rows,): rows whose defined score exceeds δ."""
        if self.scores is None:
            return None
        return np.nan_to_num(self.scores, nan=-np.inf) > self.delta

    def score_histogram(self, bins: int = 40) -> dict[str, list[float]]:
        """Histogram of the defined LIC scores on a log10 axis: ``edges`` (bins+1) and ``counts`` (bins)."""
        if self.scores is None:
            return {}
        s = self.scores[np.isfinite(self.scores)]
        s = s[s > 0]
        if len(s) == 0:
            return {}
        lo, hi = np.log10(s.min()), np.log10(s.max())
        counts, edges = np.histogram(np.log10(s), bins=bins, range=(lo, hi if hi > lo else lo + 1))
        return {"log10_edges": edges.tolist(), "counts": counts.tolist()}

    def evidence_summary(self, top: int = 10) -> list[dict]:
        """Source columns ranked by mean |evidence| over flagged individuals (all if none flagged)."""
        if self.evidence is None or self.scores is None or self.row_index is None:
            return []
        flagged = self.flagged()[self.row_index]
        ev = self.evidence[flagged] if flagged.any() else self.evidence
        mean_abs = ev.abs().mean().sort_values(ascending=False)
        total = float(mean_abs.sum()) or 1.0
        return [{"column": str(c), "mean_abs_evidence": float(v), "share": float(v) / total}
                for c, v in mean_abs.head(top).items()]


def delta_curve(scores: np.ndarray, n_points: int = 60) -> dict[str, list[float]]:
    """Flagged fraction as a function of δ (log grid over the defined scores' range).

    Parameters
    ----------
    scores : ndarray of shape (n,), NaN where undefined

    Returns
    -------
    dict with ``delta`` and ``flagged_fraction`` lists of length ``n_points``.
    """
    s = scores[np.isfinite(scores)]
    if len(s) == 0:
        return {"delta": [], "flagged_fraction": []}
    positive = s[s > 0]
    lo = float(np.quantile(positive, 0.01)) if len(positive) else 1e-6
    hi = float(s.max()) * 1.05 if s.max() > 0 else 1.0
    grid = np.geomspace(max(lo, 1e-9), max(hi, lo * 10), n_points)
    sorted_s = np.sort(s)
    frac = 1.0 - np.searchsorted(sorted_s, grid, side="right") / len(s)
    return {"delta": grid.tolist(), "flagged_fraction": frac.tolist()}


def _aux_training(aux: AuxiliaryModel) -> dict[str, Any]:
    """Everything that determines a trained auxiliary model besides the data: its settings as used."""
    return {
        "kind": aux.kind, "hidden": list(aux.hidden), "epochs": aux.epochs, "epochs_run": getattr(aux, "epochs_run_", None),
        "lr": aux.lr, "batch_size": aux.batch_size, "batch_size_used": getattr(aux, "batch_size_", None),
        "weight_decay": aux.weight_decay, "holdout": aux.holdout, "patience": aux.patience,
        "output_space": aux.output_space, "seed": aux.seed, "n_train": getattr(aux, "n_train_", None),
        "n_holdout": getattr(aux, "n_holdout_", None), "optimizer": "Adam", "dtype": "float32",
    }


def _encoded_level(enc: ColumnEncoding, label: str) -> np.ndarray:
    """Encoded vector (width,) of one protected group's value in the target's features."""
    if enc.kind == "numeric":
        try:
            value = {"True": 1.0, "False": 0.0}[label] if label in ("True", "False") else float(label)
        except ValueError as exc:
            raise InputError(f"protected group '{label}' of numeric input column '{enc.name}' is not a number") from exc
        scale = enc.std if enc.std > 0 else 1.0
        return np.array([(value - enc.mean) / scale])
    vec = np.zeros(enc.width)
    if label in enc.levels:
        vec[enc.levels.index(label)] = 1.0
    elif "__infrequent__" in enc.levels:
        vec[enc.levels.index("__infrequent__")] = 1.0
    else:
        raise InputError(f"protected group '{label}' is not a level of input column '{enc.name}' ({list(enc.levels)})")
    return vec


def direct_derivative(spec: FeatureSpec, protected: ProtectedAttribute) -> tuple[np.ndarray, np.ndarray]:
    """∂x/∂c for the target's own protected-attribute features (METHOD.md open point 6).

    Returns
    -------
    mask : ndarray of shape (d,), bool
        Encoded features of the protected column.
    dx_dc : ndarray of shape (d, k)
        Binary/multi-class: encoded value of group j minus that of group 0 (j = 1..m−1), i.e.
        the change of x when the individual's group changes, in the same parametrisation as the
        aux model's k outputs; continuous: 1/std (per unit of c).
    """
    mask = spec.feature_mask(protected.name)
    enc = spec.columns[spec.source_columns.index(protected.name)]
    if protected.kind == "continuous":
        cols = np.array([[1.0 / (enc.std if enc.std > 0 else 1.0)]])
    else:
        base = _encoded_level(enc, protected.groups[0])
        cols = np.stack([_encoded_level(enc, g) - base for g in protected.groups[1:]], axis=1)  # (width, k)
    dx_dc = np.zeros((spec.n_features, cols.shape[1]))
    dx_dc[mask] = cols
    return mask, dx_dc


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
    """

    X: np.ndarray
    protected: ProtectedAttribute
    values: np.ndarray
    row_index: np.ndarray
    y_true: np.ndarray | None
    feature_spec: FeatureSpec


def prepare_audit(frame: pd.DataFrame, *, policy: Policy, feature_spec: FeatureSpec | None = None) -> AuditRows:
    """Select and encode the rows to audit: missing-protected rule, then the seeded ``max_rows`` sample.

    The one definition of "who is audited", shared by :func:`run_check` and the Great
    Expectations baseline metrics so that every tester scores the same individuals.

    Raises
    ------
    InputError
        Empty data, missing columns (named, with what is present), missing protected values
        (column and count), a label column among the features, or any encoding error.
    """
    if len(frame) == 0:
        raise InputError("the audit data has 0 rows")
    required = [policy.protected] + ([policy.label] if policy.label else [])
    require_columns(frame, required, what="audit data")
    protected = encode_protected(frame[policy.protected], name=policy.protected, kind=policy.protected_kind,
                                 missing=policy.missing_protected)
    if feature_spec is None:
        feature_spec = FeatureSpec.passthrough(frame, exclude=required)
    elif policy.label and policy.label in feature_spec.source_columns:
        raise InputError(f"the label column '{policy.label}' is one of the target's input columns; "
                         "remove it from the feature spec")
    row_index = np.flatnonzero(protected.kept)
    values = protected.values
    if policy.max_rows is not None and len(row_index) > policy.max_rows:
        pick = np.sort(np.random.default_rng(policy.seed).choice(len(row_index), policy.max_rows, replace=False))
        row_index, values = row_index[pick], values[pick]
    X = feature_spec.encode(frame.iloc[row_index])
    y_true = frame[policy.label].to_numpy()[row_index] if policy.label else None
    return AuditRows(X=X, protected=protected, values=values, row_index=row_index, y_true=y_true,
                     feature_spec=feature_spec)


def run_check(
    target_model,
    data: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None = None,
    aux_model=None,
    progress: bool = False,
    model_info: dict | None = None,
) -> CheckResult:
    """Run the fAux individual-fairness check and the policy's baseline testers, then decide.

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
        Maps the encoded features (n, d) to the declared output (policy ``target_output``).
    data : DataFrame of shape (n, any)
        Audit rows: the target's source columns, the protected column and (optionally) the label.
        Never modified.
    policy : Policy
        δ, limits, testers and settings.
    feature_spec : FeatureSpec, optional
        Encoding of the target's inputs. Without it the model receives the numeric columns as they
        are, in file order, minus the protected and label columns.
    aux_model : AuxiliaryModel or torch module, optional
        A given auxiliary model (raw outputs); its quality is measured on the audit rows.
        Trained on the audit rows (seeded, held-out quality) when omitted.
    progress : bool
        Progress bars on aux training and scoring.
    model_info : dict, optional
        Added to the provenance (model name, version, sha256, ...).

    Returns
    -------
    CheckResult

    Raises
    ------
    InputError
        Missing columns, missing values, a feature count the model does not accept, an
        ambiguous output form, and every other bad input; the message names the column, the
        row count and the fix.

    Notes
    -----
    fAux: Castiglione et al. 2022, eq. 9-10 (arXiv 2210.06288). The decision rule is in the
    module docstring.
    """
    frame = as_frame(data)
    n_rows = len(frame)
    audit = prepare_audit(frame, policy=policy, feature_spec=feature_spec)
    protected, row_index, values, X = audit.protected, audit.row_index, audit.values, audit.X
    feature_spec = audit.feature_spec
    rng = np.random.default_rng(policy.seed + 1)   # aux training sample; the audit sample used seed
    n, d = X.shape
    Xt = as_tensor(X)
    _check_model_accepts(target_model, Xt, feature_spec)

    uses_direct = policy.protected in feature_spec.source_columns
    mask = np.zeros(d, dtype=bool)
    dx_dc = None
    if uses_direct:
        mask, dx_dc = direct_derivative(feature_spec, protected)
    X_aux = X[:, ~mask]

    # ---- auxiliary model
    aux_settings = policy.aux
    if aux_model is None:
        train = np.arange(n)
        if n > aux_settings.max_train_rows:
            train = np.sort(rng.choice(n, aux_settings.max_train_rows, replace=False))
        aux = AuxiliaryModel(kind=protected.kind, hidden=aux_settings.hidden, epochs=aux_settings.epochs,
                             holdout=aux_settings.holdout, output_space=aux_settings.output_space,
                             seed=policy.seed, progress=progress)
        aux.fit(X_aux[train], values[train], groups=protected.groups)
        aux_quality, aux_metric, aux_roc = aux.quality_, aux.quality_metric_, _roc(aux)
    else:
        aux = aux_model if isinstance(aux_model, AuxiliaryModel) else AuxiliaryModel.from_module(
            aux_model, kind=protected.kind, output_space=aux_settings.output_space, groups=protected.groups,
            n_features=X_aux.shape[1])
        aux_quality, aux_metric, aux_roc = _quality_on(aux, X_aux, values, protected)

    # ---- fAux scores
    output = TargetOutput(form=policy.target_output, target_class=policy.target_class)
    faux = policy.faux
    tester = FAuxTester(target_model, aux, variant=faux.variant, output=output, ridge=faux.ridge,
                        protected_mask=mask if uses_direct else None, dx_dc_direct=dx_dc,
                        ig_baseline=faux.ig_baseline, ig_steps=faux.ig_steps, progress=progress)
    lic: LICResult = _fail_closed_scores(tester.evaluate(X, evidence=True), n)
    resolved = resolve_output_form(target_model, Xt[:256], output)

    scores_all = np.full(n_rows, np.nan)
    scores_all[row_index] = lic.scores
    flagged = lic.flagged(faux.delta)
    n_undefined = int(lic.undefined.sum())
    n_defined = n - n_undefined
    flagged_fraction = float(flagged.sum() / n_defined) if n_defined else float("nan")
    group_labels = protected.group_labels(values)
    by_group = _by_group(lic, flagged, group_labels)
    evidence = pd.DataFrame(feature_spec.aggregate(lic.evidence.astype(np.float64)),
                            columns=feature_spec.source_columns, index=row_index)

    # ---- baselines
    testers = _run_baselines(policy, target_model, resolved, X, lic, group_labels, audit.y_true, audit=audit)

    # ---- decision
    reasons: list[str] = []
    undefined_fraction = n_undefined / n
    if not np.isfinite(aux_quality) or aux_quality < policy.min_aux_quality:
        decision = "undecided"
        reasons.append(
            f"auxiliary model too weak: {aux_metric} {aux_quality:.3f} < min_aux_quality {policy.min_aux_quality:g}; "
            "fAux cannot estimate how the features depend on the protected attribute"
        )
    elif undefined_fraction > faux.max_undefined_fraction:
        decision = "undecided"
        reasons.append(
            f"{fmt_count(n_undefined)} of {fmt_count(n)} LIC scores are undefined ({undefined_fraction:.2%} > "
            f"max_undefined_fraction {faux.max_undefined_fraction:.2%})"
        )
    elif n_defined == 0 or not np.isfinite(flagged_fraction):
        decision = "undecided"
        reasons.append(
            f"no individual has a defined LIC score ({fmt_count(n_undefined)} of {fmt_count(n)} undefined); "
            "there is nothing to decide on"
        )
    elif flagged_fraction > faux.max_flagged_fraction:
        decision = "failed"
        reasons.append(
            f"flagged fraction {flagged_fraction:.2%} > max_flagged_fraction {faux.max_flagged_fraction:.2%} "
            f"(LIC score > δ = {faux.delta:g}, {fmt_count(int(flagged.sum()))} of {fmt_count(n_defined)} individuals)"
        )
    else:
        decision = "passed"
        reasons.append(
            f"flagged fraction {flagged_fraction:.2%} <= max_flagged_fraction {faux.max_flagged_fraction:.2%} "
            f"at δ = {faux.delta:g}"
        )
    gating_failures = [f"{name}: {t['summary']}" for name, t in testers.items() if t.get("gating") and not t["passed"]]
    if gating_failures and decision == "passed":
        decision = "failed"
        reasons[0:0] = [f"gating baseline tester exceeded its limit: {msg}" for msg in gating_failures]
    if n_undefined:
        reasons.append(f"{fmt_count(n_undefined)} individuals have an undefined score (zero or degenerate aux gradient)")
    if protected.n_missing:
        reasons.append(f"{fmt_count(protected.n_missing)} rows with a missing protected value were dropped (policy)")
    if uses_direct:
        reasons.append(
            f"the target model takes the protected attribute '{policy.protected}' as an input: its direct effect "
            "is added to the LIC score (max direct term "
            f"{np.nanmax(lic.direct) if lic.direct is not None and len(lic.direct) else float('nan'):.3g})"
        )

    provenance = {
        "checked_at": utc_now(),
        "seed": policy.seed,
        "policy_name": policy.name,
        "policy_sha256": policy.sha256(),
        "policy": policy.model_dump(mode="json"),
        "data_sha256": data_sha256(frame),
        "n_input_rows": n_rows,
        "feature_spec": feature_spec.name,
        "n_features": d,
        "variant": faux.variant,
        "target_output": resolved.form,
        "target_class": resolved.target_class,
        "target_differentiation": ("P(y|x) by σ'(z)·∇z in float64 from the logit" if resolved.form in ("logit", "logits")
                                   else "P(y|x) in a float64 copy of the model"),
        "aux_output_space": aux.output_space,
        "aux_epochs_run": getattr(aux, "epochs_run_", None),
        "aux_given": aux_model is not None,
        "aux_training": None if aux_model is not None else _aux_training(aux),
        "audit_sample_seed": policy.seed,
        "aux_sample_seed": policy.seed + 1,
        "n_audited": n,
        "ridge": faux.ridge,
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "torch_deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "platform": platform.platform(terse=True),
        "machine": platform.machine(),
        "protected_kind": protected.kind,
        "groups": list(protected.groups),
        "packages": package_versions(),
        **(model_info or {}),
    }
    top = _top_flagged(lic, row_index, evidence, flagged)
    return CheckResult(
        decision=decision, reasons=reasons, flagged_fraction=flagged_fraction,
        max_flagged_fraction=faux.max_flagged_fraction, delta=faux.delta, n_individuals=n,
        n_undefined=n_undefined, n_missing_protected=protected.n_missing, by_group=by_group,
        aux_quality=aux_quality, aux_quality_metric=aux_metric, evidence=evidence, testers=testers,
        provenance=provenance, scores=scores_all, row_index=row_index, uses_protected_directly=uses_direct,
        top_flagged=top, curve=delta_curve(lic.scores), aux_roc=aux_roc,
    )


def _fail_closed_scores(lic: LICResult, n: int) -> LICResult:
    """Mark every non-finite score undefined (NaN), so that it can never count as "not flagged".

    The scorer already does this (:mod:`faux_checks.method.lic`); this guard keeps the decision closed
    even if a scorer broke that contract (a NaN or inf score not in ``undefined``).

    Raises
    ------
    InputError
        If the scorer returned a number of scores other than the ``n`` audited individuals.
    """
    scores = np.asarray(lic.scores, dtype=np.float64)
    undefined = np.asarray(lic.undefined, dtype=bool)
    if scores.shape != (n,) or undefined.shape != (n,):
        raise InputError(f"the scorer returned {scores.shape} scores and {undefined.shape} undefined flags "
                         f"for {n:,} individuals")
    undefined = undefined | ~np.isfinite(scores)
    return replace(lic, scores=np.where(undefined, np.nan, scores), undefined=undefined)


def _check_model_accepts(model, X: torch.Tensor, spec: FeatureSpec) -> None:
    try:
        with torch.no_grad():
            model(X[:2])
    except Exception as exc:
        raise InputError(
            f"the target model does not accept X with {X.shape[1]} encoded features (FeatureSpec '{spec.name}', "
            f"columns {spec.source_columns[:12]}{' ...' if len(spec.source_columns) > 12 else ''}): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}. Pass the feature spec the model was trained with"
        ) from None


def _by_group(lic: LICResult, flagged: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame({"group": labels, "score": lic.scores, "flagged": flagged, "undefined": lic.undefined})
    out = df.groupby("group", observed=True).agg(
        n=("score", "size"), flagged=("flagged", "sum"), undefined=("undefined", "sum"),
        mean_score=("score", "mean"), p90_score=("score", lambda s: float(np.nanquantile(s, 0.9)) if s.notna().any() else np.nan),
    )
    defined = (out["n"] - out["undefined"]).replace(0, np.nan)
    out["flagged_fraction"] = out["flagged"] / defined
    return out[["n", "flagged", "flagged_fraction", "undefined", "mean_score", "p90_score"]]


def _top_flagged(lic: LICResult, row_index: np.ndarray, evidence: pd.DataFrame, flagged: np.ndarray, k: int = 10) -> list[dict]:
    if not flagged.any():
        return []
    idx = np.flatnonzero(flagged)
    order = idx[np.argsort(-lic.scores[idx])][:k]
    out = []
    for i in order:
        ev = evidence.iloc[i]
        cols = ev.abs().sort_values(ascending=False).head(3)
        out.append({"row": int(row_index[i]), "lic_score": float(lic.scores[i]),
                    "probability": float(lic.probability[i]),
                    "top_evidence": [{"column": str(c), "evidence": float(ev[c])} for c in cols.index]})
    return out


def _roc(aux: AuxiliaryModel) -> dict[str, list[float]]:
    y, score = aux.holdout_
    return _roc_curve(y, score, aux.kind)


def _roc_curve(y, score, kind) -> dict[str, list[float]]:
    if kind != "binary" or len(y) == 0 or len(np.unique(y)) < 2:
        return {}
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(y, score)
    keep = np.unique(np.linspace(0, len(fpr) - 1, min(len(fpr), 200)).astype(int))
    return {"fpr": fpr[keep].tolist(), "tpr": tpr[keep].tolist()}


def _quality_on(aux: AuxiliaryModel, X_aux: np.ndarray, values: np.ndarray, protected: ProtectedAttribute):
    from sklearn.metrics import r2_score, roc_auc_score

    with torch.no_grad():
        raw = aux.net_(as_tensor(X_aux))
    raw = raw[:, None] if raw.ndim == 1 else raw
    if protected.kind == "binary":
        score = torch.sigmoid(raw[:, 0]).double().numpy()
        return float(roc_auc_score(values, score)), "roc_auc (given aux model, on the audit rows)", _roc_curve(values, score, "binary")
    if protected.kind == "multiclass":
        score = torch.softmax(raw.double(), dim=1).numpy()
        return (float(roc_auc_score(values, score, multi_class="ovr", average="macro")),
                "roc_auc_ovr_macro (given aux model, on the audit rows)", {})
    return float(r2_score(values, raw[:, 0].double().numpy())), "r2 (given aux model, on the audit rows)", {}


FLAGGED_FRACTION_TESTERS = ("fta", "weighted_fta", "unfair_map", "fliptest", "ftu_flip")


def baseline_scores(name: str, settings: TesterSettings, target_model, output: TargetOutput, audit: AuditRows, *,
                    seed: int = 0) -> tuple[np.ndarray | None, str]:
    """Per-individual scores of a baseline tester on the audited rows, and what they measure.

    The one definition shared by :func:`run_check` and the Great Expectations baseline metrics.

    Returns
    -------
    scores : ndarray of shape (n,) or None
        None when the tester does not apply to this target (the str then says why).
    description : str
        The flagging rule in words (``"… > threshold"``), or "not applicable: …".
    """
    from .baselines import FlipTestTester, FTATester, FTUFlipTester, UnfairMapTester, WeightedFTATester

    X, protected, values = audit.X, audit.protected, audit.values
    thr = f"{settings.threshold:g}"
    if name == "fta":
        return (FTATester(target_model, output=output, p=settings.p).score(X),
                f"‖∇f‖_{settings.p:g} > {thr}")
    if name == "weighted_fta":
        tester = WeightedFTATester(target_model, kind=protected.kind, subspace=settings.subspace, p=settings.p,
                                   output=output).fit(X, values)
        proj = "P_S" if settings.subspace == "sensitive" else "(I − P_S)"
        return tester.score(X), f"‖{proj} ∇f‖_{settings.p:g} > {thr} (sensitive subspace of a linear model of c)"
    if name == "unfair_map":
        tester = UnfairMapTester(target_model, kind=protected.kind, steps=settings.steps, step_size=settings.step_size,
                                 penalty=settings.penalty, output=output).fit(X, values)
        return (tester.score(X), f"Unfair Map loss ratio > {thr} ({settings.steps} steps, η = {settings.step_size:g}, "
                f"λ = {settings.penalty:g})")
    if name == "fliptest":
        if protected.kind == "continuous":
            return None, "not applicable: FlipTest needs protected groups (the protected attribute is continuous)"
        tester = FlipTestTester(target_model, method=settings.method, max_n=settings.max_n, reg=settings.reg,
                                seed=seed, output=output)
        return tester.score(X, values), f"|f(x) − f(T(x))| > {thr} (FlipTest, {settings.method} transport)"
    if name == "ftu_flip":
        spec = audit.feature_spec
        if protected.name not in spec.source_columns:
            return None, "not applicable: the target does not take the protected attribute as input"
        mask, _ = direct_derivative(spec, protected)
        enc = spec.columns[spec.source_columns.index(protected.name)]
        if protected.kind == "continuous" or (int(mask.sum()) == 1 and len(protected.groups) != 2):
            return None, ("not applicable: the protected attribute's input column is not a two-level code or a "
                          "one-hot group")
        levels = (0.0, 1.0)
        if int(mask.sum()) == 1:
            levels = tuple(float(_encoded_level(enc, g)[0]) for g in protected.groups)
        tester = FTUFlipTester(target_model, protected_columns=mask, levels=levels, output=output)
        return tester.score(X), f"|f(x) − f(x with the protected input flipped)| > {thr} (FTU flip)"
    raise InputError(f"unknown per-individual tester {name!r}; known: {list(FLAGGED_FRACTION_TESTERS)}")


def flagged_summary(settings: TesterSettings, scores: np.ndarray | None, description: str) -> dict[str, Any]:
    """The report entry of a per-individual tester: flagged fraction over ``threshold`` against its limit.

    ``scores`` None (tester not applicable): value None, passed True, ``description`` as summary.
    """
    limit = settings.max_flagged_fraction
    entry: dict[str, Any] = {"statistic": "flagged_fraction", "value": None, "threshold": settings.threshold,
                             "limit": limit, "gating": settings.gating, "passed": True, "p50": None, "p90": None,
                             "summary": description}
    if scores is None:
        return entry
    frac = float(np.mean(scores > settings.threshold))
    entry.update(value=frac, passed=limit is None or frac <= limit, p50=float(np.median(scores)),
                 p90=float(np.quantile(scores, 0.9)), summary=f"{frac:.2%} of individuals with {description}")
    return entry


def _run_baselines(policy: Policy, target_model, output: TargetOutput, X: np.ndarray, lic: LICResult,
                   groups: np.ndarray, y_true: np.ndarray | None, *, audit: AuditRows | None = None) -> dict[str, Any]:
    from .baselines import group_metrics

    out: dict[str, Any] = {}
    for name, settings in policy.testers.items():
        if not settings.enabled:
            continue
        if name in FLAGGED_FRACTION_TESTERS:
            if audit is None:
                raise InputError(f"tester {name!r} needs the audit rows (pass audit=)")
            scores, description = baseline_scores(name, settings, target_model, output, audit, seed=policy.seed)
            out[name] = flagged_summary(settings, scores, description)
        elif name in ("demographic_parity", "equalized_odds"):
            if name == "equalized_odds" and y_true is None:
                out[name] = {"statistic": name, "value": None, "passed": False, "gating": settings.gating,
                             "threshold": settings.threshold, "summary": "not computed: the policy names no label column"}
                continue
            y_pred = (lic.probability > 0.5).astype(int)
            metrics = group_metrics(y_pred, groups, y_true if name == "equalized_odds" else None)
            key = "demographic_parity_difference" if name == "demographic_parity" else "equalized_odds_difference"
            value = metrics[key]
            out[name] = {"statistic": key, "value": value, "threshold": settings.threshold, "limit": settings.threshold,
                         "gating": settings.gating, "passed": value <= settings.threshold,
                         "summary": f"{key} {value:.3f} (limit {settings.threshold:g})"}
    return out
