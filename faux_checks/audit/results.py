"""The drift audit's results: per column, the fAux checks on both batches, the target's quality, the whole."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..gate.decision import Outcome, exit_code_for, rule_row
from ..gate.result import SCHEMA_VERSION, CheckResult
from ..provenance import jsonable

__all__ = ["AuditAttribute", "AuditResult", "ClassificationQuality", "ColumnDrift", "DriftResult", "FairnessDrift"]


@dataclass(frozen=True)
class ColumnDrift:
    """Drift of one column.

    Attributes
    ----------
    column : str
    role : {"feature", "protected", "other"}
        A target input, the protected attribute, or another column both batches share
        (reported, not counted in the drifted share).
    status : {"compared", "skipped"}
    kind : {"numeric", "categorical"} or None
    method : str or None
        Evidently's stat test (``"Wasserstein distance (normed)"``, ``"Jensen-Shannon distance"``,
        ...) or ``"identical constant"`` / ``"different constants"`` for the cases decided here.
    score, threshold : float or None
        The test's statistic and its threshold (a p-value test drifts below it, a distance above).
    drifted : bool or None
        None when skipped.
    reference_missing, current_missing : int
        Missing values in each batch.
    note : str
        Why the column was skipped or how it was prepared (C04); empty when nothing special.
    """

    column: str
    role: str
    status: str
    kind: str | None = None
    method: str | None = None
    score: float | None = None
    threshold: float | None = None
    drifted: bool | None = None
    reference_missing: int = 0
    current_missing: int = 0
    note: str = ""


@dataclass(frozen=True)
class DriftResult:
    """Column drift of a current batch against the reference (step 1 of :func:`run_audit`)."""

    columns: list[ColumnDrift]
    n_reference: int
    n_current: int
    html_path: str | None = None
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def counted(self) -> list[ColumnDrift]:
        """Compared feature and protected columns (the denominator of the drifted share)."""
        return [c for c in self.columns if c.status == "compared" and c.role in ("feature", "protected")]

    @property
    def drifted_share(self) -> float:
        """Share of counted columns that drifted; NaN when none was compared."""
        counted = self.counted
        return sum(bool(c.drifted) for c in counted) / len(counted) if counted else float("nan")

    @property
    def skipped(self) -> list[ColumnDrift]:
        return [c for c in self.columns if c.status == "skipped"]

    def column(self, name: str) -> ColumnDrift | None:
        return next((c for c in self.columns if c.column == name), None)

    def to_dict(self) -> dict:
        counted = self.counted
        return jsonable({
            "n_reference": self.n_reference, "n_current": self.n_current, "error": self.error,
            "n_compared": len(counted), "n_drifted": sum(bool(c.drifted) for c in counted),
            "drifted_share": self.drifted_share,
            "columns": [asdict(c) for c in self.columns],
            "skipped": [{"column": c.column, "reason": c.note} for c in self.skipped],
            "evidently_html": Path(self.html_path).name if self.html_path else None,
        })


@dataclass(frozen=True)
class FairnessDrift:
    """The fAux check on both batches and how its scores moved (step 2 of :func:`run_audit`).

    ``reference`` / ``current`` are the two :class:`CheckResult` (None where the check raised,
    ``error`` then says which batch and why). ``by_group`` rows: ``group``, ``n_reference``,
    ``n_current``, ``flagged_fraction_reference``, ``flagged_fraction_current``, ``increase``,
    ``compared`` (enough rows in both batches) and ``note``. ``aux_source``: where the auxiliary
    model came from (``source`` = ``"gate"``: the gate run's recorded model, both batches scored
    with it; ``"retrained"``: each batch trained its own; ``note`` says why). ``score_reference``
    names the scores the KS test compared the current batch with.
    """

    reference: CheckResult | None
    current: CheckResult | None
    error: str | None = None
    ks_statistic: float = float("nan")
    ks_pvalue: float = float("nan")
    n_reference_scores: int = 0
    n_current_scores: int = 0
    by_group: list[dict] = field(default_factory=list)
    score_histograms: dict = field(default_factory=dict)
    sample_note: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    aux_source: dict = field(default_factory=dict)
    score_reference: str = ""

    @property
    def flagged_fraction_reference(self) -> float:
        return self.reference.flagged_fraction if self.reference is not None else float("nan")

    @property
    def flagged_fraction_current(self) -> float:
        return self.current.flagged_fraction if self.current is not None else float("nan")

    @property
    def increase(self) -> float:
        return self.flagged_fraction_current - self.flagged_fraction_reference

    def to_dict(self) -> dict:
        return jsonable({
            "error": self.error,
            "flagged_fraction_reference": self.flagged_fraction_reference,
            "flagged_fraction_current": self.flagged_fraction_current,
            "increase": self.increase,
            "decision_reference": None if self.reference is None else self.reference.decision,
            "decision_current": None if self.current is None else self.current.decision,
            "aux_quality_reference": None if self.reference is None else self.reference.aux_quality,
            "aux_quality_current": None if self.current is None else self.current.aux_quality,
            "ks_statistic": self.ks_statistic, "ks_pvalue": self.ks_pvalue,
            "n_reference_scores": self.n_reference_scores, "n_current_scores": self.n_current_scores,
            "by_group": self.by_group, "score_histograms": self.score_histograms,
            "flagged_fraction_vs_delta": {
                "reference": {} if self.reference is None else self.reference.curve,
                "current": {} if self.current is None else self.current.curve,
            },
            "sample_note": self.sample_note,
            "aux_model": self.aux_source,
            "score_reference": self.score_reference,
        })


@dataclass(frozen=True)
class ClassificationQuality:
    """Target-model quality on both batches (step 3 of :func:`run_audit`).

    ``metrics``: name -> ``{"reference": value, "current": value}`` (accuracy, precision, recall,
    f1, roc_auc, log_loss). ``status`` is ``"skipped"`` with ``reason`` when the label column is
    absent, not binary for the tested class, or the features cannot be encoded; ``"not applicable"``, with no
    metric, for a target that returns a value (policy ``target_output = "value"``).
    """

    status: str
    reason: str = ""
    metrics: dict[str, dict[str, float | None]] = field(default_factory=dict)
    n_reference: int = 0
    n_current: int = 0
    html_path: str | None = None

    def to_dict(self) -> dict:
        return jsonable({"status": self.status, "reason": self.reason, "metrics": self.metrics,
                          "n_reference": self.n_reference, "n_current": self.n_current,
                          "evidently_html": Path(self.html_path).name if self.html_path else None})


@dataclass(frozen=True)
class AuditAttribute:
    """One protected attribute's fairness drift in an audit (one per attribute the policy checks).

    Attributes
    ----------
    attribute : str
        The column, or an intersection's derived column (``sex×race``).
    components : tuple of str
        An intersection's columns; empty for a declared attribute.
    fairness : FairnessDrift
        The fAux check on both batches with this attribute's own auxiliary model (the gate's
        ``records/<key>/`` when it fits).
    decision : {"passed", "failed", "undecided"}
        :func:`~faux_checks.gate.decision.decide` over this attribute's own rows (its protected
        drift and fairness limits); the audit's decision is decided once over every row.
    reasons : list of str
        This attribute's deciding rows first.
    cells : list of dict
        Intersections only: :func:`~faux_checks.gate.attributes.intersection_cells` of the current batch.
    """

    attribute: str
    components: tuple[str, ...]
    fairness: FairnessDrift
    decision: str
    reasons: list[str]
    cells: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """A report section (:func:`~faux_checks.gate.attributes.section_dict` of the current batch's check) with
        the attribute's audit ``decision``/``exit_code``/``reasons`` and ``audit`` (:meth:`FairnessDrift.to_dict`)."""
        from ..gate.sections import section_dict

        current = None if self.fairness.current is None else self.fairness.current.to_dict()
        section = section_dict(self.attribute, self.components, current, self.cells)
        section.update({"decision": self.decision, "exit_code": exit_code_for(self.decision), "reasons": list(self.reasons),
                        "audit": self.fairness.to_dict()})
        return jsonable(section)


@dataclass(frozen=True)
class AuditResult(Outcome):
    """Outcome of one drift audit, computed eagerly and then read-only.

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
        The rule that produced the decision first, then the other exceeded or not computed
        limits, then notes (skipped columns, sampling).
    limits : list of dict
        Every audit limit: ``rule``, ``observed``, ``limit``, ``status`` (``"ok"``,
        ``"exceeded"``, ``"not computed"``; :data:`faux_checks.gate.decision.STATUSES`), ``detail``.
    drift, fairness, classification : the three steps' results.
    timings : dict
        Wall seconds per step.
    provenance : dict
        Hashes and row counts of both batches, policy hash, seed, package versions.
    attributes : tuple of AuditAttribute
        One per protected attribute, in the policy's order (``fairness`` is the deciding attribute's;
        with several, every per-attribute limit is prefixed ``attribute/``); empty only for an audit
        that could not run (:meth:`undecided`).
    """

    decision: str
    reasons: list[str]
    limits: list[dict]
    drift: DriftResult
    fairness: FairnessDrift
    classification: ClassificationQuality
    timings: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    attributes: tuple[AuditAttribute, ...] = ()

    @classmethod
    def undecided(cls, reason: str, *, provenance: dict | None = None) -> "AuditResult":
        """An audit that could not run at all (e.g. the current batch cannot be read); never a pass."""
        return cls(decision="undecided", reasons=[reason],
                   limits=[rule_row("audit", "not computed", reason)],
                   drift=DriftResult(columns=[], n_reference=0, n_current=0, error=reason),
                   fairness=FairnessDrift(reference=None, current=None, error=reason),
                   classification=ClassificationQuality("skipped", reason), provenance=jsonable(provenance or {}))


    @property
    def rule(self) -> str:
        """The rule that produced the decision (first reason)."""
        return self.reasons[0] if self.reasons else ""

    def __repr__(self) -> str:
        return f"audit {self.decision}: {self.rule}"

    def to_dict(self) -> dict:
        """JSON-ready dict with ``schema_version`` (the fAux checks' own dicts under ``fairness``)."""
        return jsonable({
            "schema_version": SCHEMA_VERSION,
            "decision": self.decision,
            "exit_code": self.exit_code,
            "rule": self.rule,
            "reasons": self.reasons,
            "limits": self.limits,
            "drift": self.drift.to_dict(),
            "fairness": self.fairness.to_dict(),
            "reference_check": None if self.fairness.reference is None else self.fairness.reference.to_dict(),
            "classification": self.classification.to_dict(),
            "timings": self.timings,
            "provenance": self.provenance,
            **({"attributes": [a.to_dict() for a in self.attributes]} if self.attributes else {}),
        })
