"""The registry's record codec: the only module that spells a ``fairness_*`` tag name.

What a gate writes on a model version (:class:`GateRecord`, with the flow's :class:`GateProvenance` and
one :class:`AttributeRecord` per protected attribute), what a drift audit writes (:class:`AuditRecord`,
one :class:`AuditAttributeRecord` per attribute) and what is read back about a version
(:class:`VersionRecord`), each with ``to_tags() -> dict[str, str]`` and ``from_tags(tags)``.

One shape is read back: a decided record always has its attributes (``attributes``, ``by_attribute``). A
record whose tags name no attribute (a gate or audit that wrote only the headline tags for its one
attribute) reads as one attribute, :data:`UNNAMED_ATTRIBUTE`, whose record carries the headline's
decision and numbers: the codec alone makes that shape, no reader of a record tells them apart. Values are written by :func:`tag_value` (floats
exactly, by ``repr``; None as ``""``; bools ``true``/``false``) and parsed back here only: a number that
is missing, ``""``, ``"None"``, not a number or not finite reads as None; a text that is missing, ``""``
or ``"None"`` reads as None. Tags the codec does not name are kept, as given, in ``extra``.

Imports nothing from the rest of the package but :mod:`.tag_values` (a leaf: :mod:`.client`, :mod:`.trail`,
:mod:`.versions`, :mod:`.operations`, the flows and the CLI import it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .tag_values import parse_bool, parse_count, parse_number, parse_text, tag_value

__all__ = ["AttributeRecord", "AuditAttributeRecord", "AuditRecord", "GateProvenance", "GateRecord",
           "UNNAMED_ATTRIBUTE", "UNNAMED_KEY", "VersionRecord", "attribute_set_tags", "parse_number", "parse_text",
           "tag_value"]

PREFIX = "fairness_"

# ---------------------------------------------------------------------------- version tags: the gate
GATE_TAG = "fairness_gate"                      # passed / failed / undecided, or running while gating
FLAGGED_FRACTION_TAG = "fairness_flagged_fraction"
FLAGGED_FRACTION_LOWER_TAG = "fairness_flagged_fraction_lower"
FLAGGED_FRACTION_UPPER_TAG = "fairness_flagged_fraction_upper"
CONFIDENCE_TAG = "fairness_confidence"
AUX_SEED_SPREAD_TAG = "fairness_aux_seed_spread"
DELTA_TAG = "fairness_delta"
AUX_QUALITY_TAG = "fairness_aux_quality"
REPORT_TAG = "fairness_report"                  # the report's local path (report.html)
RUN_ID_TAG = "fairness_run_id"
CHECKED_AT_TAG = "fairness_checked_at"
STARTED_AT_TAG = "fairness_started_at"
PREVIOUS_GATE_TAG = "fairness_previous_gate"
#: Set to ``pending`` (with a ``passed`` decision) by a gate that will move the alias, and to
#: ``done`` by :meth:`Registry.promote`: a gate killed in between leaves the version new.
PROMOTION_TAG = "fairness_promotion"
PROMOTED_AT_TAG = "fairness_promoted_at"
PROMOTION_KEPT_ON_TAG = "fairness_promotion_kept_on"
DEMOTED_AT_TAG = "fairness_demoted_at"
DEMOTED_ALIAS_TAG = "fairness_demoted_alias"
POLICY_SHA_TAG = "fairness_policy_sha256"
POLICY_NAME_TAG = "fairness_policy_name"
REPORT_URI_TAG = "fairness_report_uri"
COMPARED_WITH_TAG = "fairness_compared_with"
CHURN_AGAINST_TAG = "fairness_churn_against"
CHURN_NEWLY_FLAGGED_TAG = "fairness_churn_newly_flagged"
CHURN_RESOLVED_TAG = "fairness_churn_resolved"
CHURN_N_TAG = "fairness_churn_n"
EVIDENCE_URI_TAG = "fairness_evidence_uri"
EVIDENCE_SIGNED_TAG = "fairness_evidence_signed"
DATA_URI_TAG = "fairness_data_uri"
DATA_PATH_TAG = "fairness_data_path"
DATA_SHA_TAG = "fairness_data_sha256"
#: Version tag of a recorded ``undecided``: :data:`NO_CHECK` when the check never ran (configuration or
#: loading: the next gate with a changed policy or data re-gates it), else "".
UNDECIDED_CAUSE_TAG = "fairness_undecided_cause"
NO_CHECK = "no_check"
ATTRIBUTES_TAG = "fairness_attributes"          # a several-attribute gate: the attributes, comma-separated
DECIDING_ATTRIBUTE_TAG = "fairness_deciding_attribute"
#: Per-attribute version tags of a several-attribute gate (``fairness_attr_<key>_*``); a re-gate empties those it does not set.
ATTRIBUTE_TAG_PREFIX = "fairness_attr_"
#: A version tag: JSON of the gate holding the version (:mod:`faux_checks.registry.operations`).
LEASE_TAG = "fairness_gate_lease"

# ---------------------------------------------------------------------------- version tags: the audit
AUDIT_TAG = "fairness_audit"  # latest drift audit of a version: passed / failed / undecided
AUDIT_REASON_TAG = "fairness_audit_reason"
AUDIT_REPORT_TAG = "fairness_audit_report"
AUDIT_RUN_ID_TAG = "fairness_audit_run_id"
AUDIT_AT_TAG = "fairness_audit_at"
AUDIT_FLAGGED_FRACTION_TAG = "fairness_audit_flagged_fraction"
AUDIT_DRIFTED_SHARE_TAG = "fairness_audit_drifted_share"
AUDIT_DATA_PATH_TAG = "fairness_audit_data_path"
AUDIT_DATA_URI_TAG = "fairness_audit_data_uri"
AUDIT_REPORT_URI_TAG = "fairness_audit_report_uri"
AUDIT_ATTRIBUTES_TAG = "fairness_audit_attributes"
AUDIT_DATA_AT_TAG, AUDIT_STARTED_AT_TAG = "fairness_audit_data_at", "fairness_audit_started_at"  # audit_order.py
AUDIT_ATTRIBUTE_TAG_PREFIX = "fairness_audit_attr_"

# ---------------------------------------------------------------------------- run tags
#: Gate-run tag: the key (gate/aux_cache.py) of the one auxiliary model in the run's records.
AUX_KEY_TAG = "fairness_aux_key"
#: ``"<seed>:<key> <seed>:<key>"``: the keys of a gate run's recorded extra aux seeds (``aux_model_seed<seed>.*``).
AUX_SEED_KEYS_TAG = "fairness_aux_seed_keys"
#: Run tag of a gate or audit run: ``recording`` from its creation until the version's decision tags name
#: it, then ``decided``; a run left ``recording`` by a killed gate becomes ``abandoned`` (with
#: :data:`SUPERSEDED_BY_TAG`) when a later run of the same version and kind records its decision.
RUN_STATE_TAG = "fairness_run_state"
SUPERSEDED_BY_TAG = "fairness_superseded_by"

_MAX_REASON_CHARS = 1000

#: The attribute name of a decided record whose tags name none (its one attribute's column is not in the tags).
UNNAMED_ATTRIBUTE = "(unnamed)"
#: Its tag key (:func:`faux_checks.gate.sections.attribute_key` of :data:`UNNAMED_ATTRIBUTE`).
UNNAMED_KEY = "_unnamed_"
_DECISIONS = ("passed", "failed", "undecided")


def record_uri_tag(name: str) -> str:
    """``fairness_<record>_uri``: where a gate run's record (``scores``, ``policy``, ``attr_<key>_scores``, ...) lies."""
    return f"{PREFIX}{name}_uri"


def attribute_tag(key: str, name: str) -> str:
    """``fairness_attr_<key>_<name>``: a several-attribute gate's per-attribute version tag."""
    return f"{ATTRIBUTE_TAG_PREFIX}{key}_{name}"


def audit_attribute_tag(key: str, name: str) -> str:
    """``fairness_audit_attr_<key>_<name>``: a several-attribute audit's per-attribute version tag."""
    return f"{AUDIT_ATTRIBUTE_TAG_PREFIX}{key}_{name}"


def _names(text: Any) -> tuple[str, ...]:
    return tuple(n for n in str(text or "").split(",") if n)


def _extra(tags: Mapping[str, str], known) -> dict[str, str]:
    return {k: v for k, v in tags.items() if k not in known}


_ATTRIBUTE_FIELDS = ("decision", "flagged_fraction", "flagged_fraction_lower", "flagged_fraction_upper", "aux_quality")


@dataclass(frozen=True)
class AttributeRecord:
    """One attribute of a gate: ``fairness_attr_<key>_{decision, flagged_fraction, _lower,
    _upper, aux_quality}`` (``key``: :func:`~faux_checks.gate.attributes.attribute_key` of its name)."""

    key: str
    decision: str | None = None
    flagged_fraction: float | None = None
    flagged_fraction_lower: float | None = None
    flagged_fraction_upper: float | None = None
    aux_quality: float | None = None

    def to_tags(self) -> dict[str, str]:
        """The five tags, in the gate's write order (None written ``""``)."""
        return {attribute_tag(self.key, name): tag_value(getattr(self, name)) for name in _ATTRIBUTE_FIELDS}

    @classmethod
    def from_tags(cls, key: str, tags: Mapping[str, str]) -> AttributeRecord:
        """The attribute ``key``'s record from a version's tags (missing tags read as None)."""
        return cls(key=key, decision=parse_text(tags.get(attribute_tag(key, "decision"))),
                   **{name: parse_number(tags.get(attribute_tag(key, name))) for name in _ATTRIBUTE_FIELDS[1:]})


def attribute_set_tags(names, deciding: str | None, records) -> dict[str, str]:
    """The tags of a gate's attributes: ``fairness_attributes`` (the names, comma-separated),
    ``fairness_deciding_attribute`` (the one the headline tags carry) and each :class:`AttributeRecord`'s
    five tags; empty when ``names`` is empty or :data:`UNNAMED_ATTRIBUTE` alone (a record read that way keeps its tags)."""
    if not names or tuple(names) == (UNNAMED_ATTRIBUTE,):
        return {}
    tags = {ATTRIBUTES_TAG: ",".join(names), DECIDING_ATTRIBUTE_TAG: tag_value(deciding)}
    for a in records:
        tags.update(a.to_tags())
    return tags


def _unnamed_gate_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The attribute tags of a decided gate record that names no attribute: one, :data:`UNNAMED_ATTRIBUTE`, with the
    headline's decision and numbers."""
    decision = tags.get(GATE_TAG, "") if parse_text(tags.get(GATE_TAG)) in _DECISIONS else ""
    one = {"decision": decision, "flagged_fraction": tags.get(FLAGGED_FRACTION_TAG, ""),
           "flagged_fraction_lower": tags.get(FLAGGED_FRACTION_LOWER_TAG, ""),
           "flagged_fraction_upper": tags.get(FLAGGED_FRACTION_UPPER_TAG, ""), "aux_quality": tags.get(AUX_QUALITY_TAG, "")}
    return {ATTRIBUTES_TAG: UNNAMED_ATTRIBUTE, DECIDING_ATTRIBUTE_TAG: UNNAMED_ATTRIBUTE,
            **{attribute_tag(UNNAMED_KEY, name): value for name, value in one.items()}}


_PROVENANCE_TAGS = (PROMOTION_TAG, POLICY_SHA_TAG, POLICY_NAME_TAG, REPORT_URI_TAG, COMPARED_WITH_TAG, CHURN_AGAINST_TAG,
                    CHURN_NEWLY_FLAGGED_TAG, CHURN_RESOLVED_TAG, CHURN_N_TAG, EVIDENCE_URI_TAG, EVIDENCE_SIGNED_TAG,
                    DATA_URI_TAG, DATA_PATH_TAG, DATA_SHA_TAG, UNDECIDED_CAUSE_TAG)


@dataclass(frozen=True)
class GateProvenance:
    """The tags the gate flow adds to a decision: promotion, policy, report and record URIs, the comparison with
    earlier versions (churn), the evidence pack, the audit data and the cause of an undecided.

    ``record_uris``: record name -> ``runs:/<run>/records/<file>`` (None: the run lacks it, written ``""``).
    The churn counts are ints as the flow writes them; read back (:meth:`from_tags`, :func:`parse_count`) a
    tag that is not an integer comes as a float.
    """

    promotion: str | None = None
    policy_sha256: str | None = None
    policy_name: str | None = None
    report_uri: str | None = None
    record_uris: Mapping[str, str | None] = field(default_factory=dict)
    compared_with: str | None = None
    churn_against: str | None = None
    churn_newly_flagged: int | float | None = None
    churn_resolved: int | float | None = None
    churn_n: int | float | None = None
    evidence_uri: str | None = None
    evidence_signed: bool | None = None
    data_uri: str | None = None
    data_path: str | None = None
    data_sha256: str | None = None
    undecided_cause: str | None = None

    def to_tags(self) -> dict[str, str]:
        """The flow's tags, in its write order (None written ``""``)."""
        head = {PROMOTION_TAG: self.promotion, POLICY_SHA_TAG: self.policy_sha256, POLICY_NAME_TAG: self.policy_name,
                REPORT_URI_TAG: self.report_uri}
        tail = {COMPARED_WITH_TAG: self.compared_with, CHURN_AGAINST_TAG: self.churn_against,
                CHURN_NEWLY_FLAGGED_TAG: self.churn_newly_flagged, CHURN_RESOLVED_TAG: self.churn_resolved,
                CHURN_N_TAG: self.churn_n, EVIDENCE_URI_TAG: self.evidence_uri,
                EVIDENCE_SIGNED_TAG: self.evidence_signed, DATA_URI_TAG: self.data_uri, DATA_PATH_TAG: self.data_path,
                DATA_SHA_TAG: self.data_sha256, UNDECIDED_CAUSE_TAG: self.undecided_cause}
        uris = {record_uri_tag(name): uri for name, uri in self.record_uris.items()}
        return {k: tag_value(v) for k, v in {**head, **uris, **tail}.items()}

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> GateProvenance:
        """The flow's tags read back (record URIs: every ``fairness_<name>_uri`` but the report's)."""
        uris = {k[len(PREFIX):-len("_uri")]: parse_text(v) for k, v in tags.items()
                if k.startswith(PREFIX) and k.endswith("_uri") and k not in
                (REPORT_URI_TAG, DATA_URI_TAG, EVIDENCE_URI_TAG, AUDIT_DATA_URI_TAG, AUDIT_REPORT_URI_TAG)}
        text = {name: parse_text(tags.get(tag)) for name, tag in
                (("promotion", PROMOTION_TAG), ("policy_sha256", POLICY_SHA_TAG), ("policy_name", POLICY_NAME_TAG),
                 ("report_uri", REPORT_URI_TAG), ("compared_with", COMPARED_WITH_TAG),
                 ("churn_against", CHURN_AGAINST_TAG), ("evidence_uri", EVIDENCE_URI_TAG), ("data_uri", DATA_URI_TAG),
                 ("data_path", DATA_PATH_TAG), ("data_sha256", DATA_SHA_TAG),
                 ("undecided_cause", UNDECIDED_CAUSE_TAG))}
        return cls(record_uris=uris, churn_newly_flagged=parse_count(tags.get(CHURN_NEWLY_FLAGGED_TAG)),
                   churn_resolved=parse_count(tags.get(CHURN_RESOLVED_TAG)), churn_n=parse_count(tags.get(CHURN_N_TAG)),
                   evidence_signed=parse_bool(tags.get(EVIDENCE_SIGNED_TAG)), **text)


_HEADLINE = (("flagged_fraction", FLAGGED_FRACTION_TAG), ("flagged_fraction_lower", FLAGGED_FRACTION_LOWER_TAG),
             ("flagged_fraction_upper", FLAGGED_FRACTION_UPPER_TAG), ("confidence", CONFIDENCE_TAG),
             ("aux_seed_spread", AUX_SEED_SPREAD_TAG), ("delta", DELTA_TAG), ("aux_quality", AUX_QUALITY_TAG))


@dataclass(frozen=True)
class GateRecord:
    """The decision tags a gate writes on a model version (:meth:`DecisionTrail.record_decision`).

    Headline: ``decision`` and the numbers behind it (fractions, confidence, δ and aux AUC as written: floats, or
    None for "not computed"), ``report`` (the report's path), ``run_id`` and ``checked_at`` (UTC, ISO 8601).
    ``provenance``: the flow's tags (None: not written, e.g. a direct :meth:`record_decision` call).
    ``attributes`` / ``deciding_attribute`` / ``by_attribute``: the gate's protected attributes, the one whose
    check the headline numbers are, and each one's record (read back, a decided record always has them:
    module docstring; a record built to be written may leave them empty).
    ``extra``: other tags, as given.
    """

    decision: str | None
    flagged_fraction: float | None = None
    flagged_fraction_lower: float | None = None
    flagged_fraction_upper: float | None = None
    confidence: float | None = None
    aux_seed_spread: float | None = None
    delta: float | None = None
    aux_quality: float | None = None
    report: str | None = None
    run_id: str | None = None
    checked_at: str | None = None
    provenance: GateProvenance | None = None
    attributes: tuple[str, ...] = ()
    deciding_attribute: str | None = None
    by_attribute: tuple[AttributeRecord, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)

    def attribute_tags(self) -> dict[str, str]:
        """``fairness_attributes``, ``fairness_deciding_attribute`` and each attribute's tags; empty without attributes."""
        return attribute_set_tags(self.attributes, self.deciding_attribute, self.by_attribute)

    def headline_tags(self) -> dict[str, str]:
        """The numbers, report, run and time: what every recorded decision carries (not ``fairness_gate``)."""
        tags = {tag: tag_value(getattr(self, name)) for name, tag in _HEADLINE}
        tags.update({REPORT_TAG: tag_value(self.report), RUN_ID_TAG: tag_value(self.run_id),
                     CHECKED_AT_TAG: tag_value(self.checked_at)})
        return tags

    def to_tags(self) -> dict[str, str]:
        """Every tag, in the write order: provenance, attributes, extra, headline, and ``fairness_gate`` last
        (a gate killed while recording leaves the version ``running``, hence new)."""
        tags = {**(self.provenance.to_tags() if self.provenance else {}), **self.attribute_tags(),
                **{str(k): tag_value(v) for k, v in self.extra.items()}}
        tags.update(self.headline_tags())
        tags.pop(GATE_TAG, None)
        tags[GATE_TAG] = tag_value(self.decision)
        return tags

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> GateRecord:
        """A version's gate record read back (missing tags read as None; an attribute's record for each
        ``fairness_attr_<key>_decision`` tag present, keys sorted; tags the codec does not name in ``extra``).

        A decided record whose tags name no attribute reads as one, :data:`UNNAMED_ATTRIBUTE` (module docstring)."""
        if ATTRIBUTES_TAG not in tags and (parse_text(tags.get(GATE_TAG)) in _DECISIONS or any(
                t in tags for t in (CHECKED_AT_TAG, RUN_ID_TAG, FLAGGED_FRACTION_TAG))):
            tags = {**tags, **_unnamed_gate_tags(tags)}
        names = _names(tags.get(ATTRIBUTES_TAG))
        keys = sorted({k[len(ATTRIBUTE_TAG_PREFIX):-len("_decision")] for k in tags
                       if k.startswith(ATTRIBUTE_TAG_PREFIX) and k.endswith("_decision")})
        provenance = GateProvenance.from_tags(tags)
        known = {GATE_TAG, REPORT_TAG, RUN_ID_TAG, CHECKED_AT_TAG, ATTRIBUTES_TAG, DECIDING_ATTRIBUTE_TAG,
                 *(tag for _, tag in _HEADLINE), *_PROVENANCE_TAGS, *(record_uri_tag(n) for n in provenance.record_uris)}
        extra = {k: v for k, v in tags.items() if k not in known and not k.startswith(ATTRIBUTE_TAG_PREFIX)}
        return cls(decision=parse_text(tags.get(GATE_TAG)),
                   **{name: parse_number(tags.get(tag)) for name, tag in _HEADLINE},
                   report=parse_text(tags.get(REPORT_TAG)), run_id=parse_text(tags.get(RUN_ID_TAG)),
                   checked_at=parse_text(tags.get(CHECKED_AT_TAG)),
                   provenance=provenance if any(t in tags for t in _PROVENANCE_TAGS) else None,
                   attributes=names, deciding_attribute=parse_text(tags.get(DECIDING_ATTRIBUTE_TAG)),
                   by_attribute=tuple(AttributeRecord.from_tags(k, tags) for k in keys), extra=extra)

    def attribute(self, key: str) -> AttributeRecord:
        """The record of the attribute whose tag key is ``key`` (all fields None when the tags lack it)."""
        return next((a for a in self.by_attribute if a.key == key), AttributeRecord(key=key))


_AUDIT_ATTRIBUTE_FIELDS = ("decision", "flagged_fraction", "increase", "aux_model")


@dataclass(frozen=True)
class AuditAttributeRecord:
    """One attribute of an audit: ``fairness_audit_attr_<key>_{decision, flagged_fraction,
    increase, aux_model}`` (current flagged fraction, its increase over the reference, the aux model's source)."""

    key: str
    decision: str | None = None
    flagged_fraction: float | None = None
    increase: float | None = None
    aux_model: str | None = None

    def to_tags(self) -> dict[str, str]:
        """The four tags, in the audit's write order."""
        return {audit_attribute_tag(self.key, n): tag_value(getattr(self, n)) for n in _AUDIT_ATTRIBUTE_FIELDS}

    @classmethod
    def from_tags(cls, key: str, tags: Mapping[str, str]) -> AuditAttributeRecord:
        """The attribute ``key``'s audit record from a version's tags (missing tags read as None)."""
        get = lambda n: tags.get(audit_attribute_tag(key, n))  # noqa: E731
        return cls(key=key, decision=parse_text(get("decision")), flagged_fraction=parse_number(get("flagged_fraction")),
                   increase=parse_number(get("increase")), aux_model=parse_text(get("aux_model")))


@dataclass(frozen=True)
class AuditRecord:
    """What a drift audit writes on a version (:meth:`DecisionTrail.record_audit`): ``decision``, ``reason`` (cut
    to 1,000 characters when written), ``report`` (path), ``run_id``, ``at`` (UTC), and from the audit flow
    the current flagged fraction, the drifted share of columns, the data and report URIs and its protected
    attributes, ``attributes`` and ``by_attribute`` (read back, a decided audit always has them: module
    docstring). ``extra``: other tags, as given."""

    decision: str | None
    reason: str | None = None
    report: str | None = None
    run_id: str | None = None
    at: str | None = None
    flagged_fraction: float | None = None
    drifted_share: float | None = None
    data_path: str | None = None
    data_uri: str | None = None
    report_uri: str | None = None
    attributes: tuple[str, ...] = ()
    by_attribute: tuple[AuditAttributeRecord, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)
    data_at: str | None = None      # batch modified, audit started (UTC): their order, audit_order.is_older
    started_at: str | None = None
    #: True when the audit flow's own tags (flagged fraction ... report URI) are written (False: a direct call).
    flow_tags: bool = True

    def measurement_tags(self) -> dict[str, str]:
        """The audit flow's tags (flagged fraction, drifted share, data and report URIs; none when not
        ``flow_tags``) and the attributes' (``fairness_audit_attributes``, each attribute's four)."""
        tags: dict[str, str] = {}
        if self.flow_tags:
            tags.update({AUDIT_FLAGGED_FRACTION_TAG: tag_value(self.flagged_fraction),
                         AUDIT_DRIFTED_SHARE_TAG: tag_value(self.drifted_share),
                         AUDIT_DATA_PATH_TAG: tag_value(self.data_path), AUDIT_DATA_URI_TAG: tag_value(self.data_uri),
                         AUDIT_REPORT_URI_TAG: tag_value(self.report_uri)})
        if self.attributes and self.attributes != (UNNAMED_ATTRIBUTE,):      # an unnamed one keeps the tags as read
            tags[AUDIT_ATTRIBUTES_TAG] = ",".join(self.attributes)
            for a in self.by_attribute:
                tags.update(a.to_tags())
        return tags

    def to_tags(self) -> dict[str, str]:
        """Every tag, in the write order: the flow's, attributes, extra, reason/report/run/time, ``fairness_audit`` last."""
        tags = self.measurement_tags()
        tags.update({str(k): tag_value(v) for k, v in self.extra.items()})
        text = str(self.reason)
        tags.update({AUDIT_REASON_TAG: text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "…",
                     AUDIT_REPORT_TAG: tag_value(self.report), AUDIT_RUN_ID_TAG: tag_value(self.run_id),
                     AUDIT_AT_TAG: tag_value(self.at)})
        tags.update({k: v for k, v in ((AUDIT_DATA_AT_TAG, self.data_at), (AUDIT_STARTED_AT_TAG, self.started_at)) if v})
        tags.pop(AUDIT_TAG, None)
        tags[AUDIT_TAG] = tag_value(self.decision)
        return tags

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> AuditRecord:
        """A version's latest audit read back (only ``fairness_audit*`` tags; the rest is the gate's).

        A decided audit whose tags name no attribute reads as one, :data:`UNNAMED_ATTRIBUTE` (module docstring)."""
        if parse_text(tags.get(AUDIT_TAG)) in _DECISIONS and AUDIT_ATTRIBUTES_TAG not in tags:
            tags = {**tags, AUDIT_ATTRIBUTES_TAG: UNNAMED_ATTRIBUTE,
                    audit_attribute_tag(UNNAMED_KEY, "decision"): tags[AUDIT_TAG],
                    audit_attribute_tag(UNNAMED_KEY, "flagged_fraction"): tags.get(AUDIT_FLAGGED_FRACTION_TAG, "")}
        keys = sorted({k[len(AUDIT_ATTRIBUTE_TAG_PREFIX):-len("_decision")] for k in tags
                       if k.startswith(AUDIT_ATTRIBUTE_TAG_PREFIX) and k.endswith("_decision")})
        flow = (AUDIT_FLAGGED_FRACTION_TAG, AUDIT_DRIFTED_SHARE_TAG, AUDIT_DATA_PATH_TAG, AUDIT_DATA_URI_TAG,
                AUDIT_REPORT_URI_TAG)
        known = {AUDIT_TAG, AUDIT_REASON_TAG, AUDIT_REPORT_TAG, AUDIT_RUN_ID_TAG, AUDIT_AT_TAG, AUDIT_ATTRIBUTES_TAG,
                 AUDIT_DATA_AT_TAG, AUDIT_STARTED_AT_TAG, *flow}
        extra = {k: v for k, v in tags.items() if k.startswith(AUDIT_TAG) and k not in known
                 and not k.startswith(AUDIT_ATTRIBUTE_TAG_PREFIX)}
        return cls(decision=parse_text(tags.get(AUDIT_TAG)), reason=parse_text(tags.get(AUDIT_REASON_TAG)),
                   report=parse_text(tags.get(AUDIT_REPORT_TAG)), run_id=parse_text(tags.get(AUDIT_RUN_ID_TAG)),
                   at=parse_text(tags.get(AUDIT_AT_TAG)), flagged_fraction=parse_number(tags.get(AUDIT_FLAGGED_FRACTION_TAG)),
                   drifted_share=parse_number(tags.get(AUDIT_DRIFTED_SHARE_TAG)),
                   data_path=parse_text(tags.get(AUDIT_DATA_PATH_TAG)), data_uri=parse_text(tags.get(AUDIT_DATA_URI_TAG)),
                   report_uri=parse_text(tags.get(AUDIT_REPORT_URI_TAG)), attributes=_names(tags.get(AUDIT_ATTRIBUTES_TAG)),
                   by_attribute=tuple(AuditAttributeRecord.from_tags(k, tags) for k in keys), extra=extra,
                   data_at=parse_text(tags.get(AUDIT_DATA_AT_TAG)), started_at=parse_text(tags.get(AUDIT_STARTED_AT_TAG)),
                   flow_tags=any(t in tags for t in flow))


@dataclass(frozen=True)
class VersionRecord:
    """What is read back about a version: its gate state and record, its latest audit, promotion and lease.

    ``state``: the ``fairness_gate`` tag as written (``passed`` / ``failed`` / ``undecided`` / ``running``, None
    when never gated); ``gate``: the recorded decision (None while never decided: no tag, or ``running`` with
    no decision written before); ``audit``: the latest audit (None when never audited); ``previous_gate``: a
    re-gate's one-line summary of the decision before it; ``promotion``: ``pending`` / ``done`` /
    ``superseded`` / ``none``; ``lease``: the lease tag's JSON text (None when free). ``extra``: tags the
    codec does not name (``model_sha256``, ...).
    """

    state: str | None
    gate: GateRecord | None = None
    audit: AuditRecord | None = None
    started_at: str | None = None
    previous_gate: str | None = None
    promotion: str | None = None
    promoted_at: str | None = None
    promotion_kept_on: str | None = None
    demoted_at: str | None = None
    demoted_alias: str | None = None
    lease: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    _STATE_TAGS = ((STARTED_AT_TAG, "started_at"), (PREVIOUS_GATE_TAG, "previous_gate"), (PROMOTED_AT_TAG, "promoted_at"),
                   (PROMOTION_KEPT_ON_TAG, "promotion_kept_on"), (DEMOTED_AT_TAG, "demoted_at"),
                   (DEMOTED_ALIAS_TAG, "demoted_alias"), (LEASE_TAG, "lease"))

    @property
    def decision(self) -> str | None:
        """The recorded decision (``passed`` / ``failed`` / ``undecided``), None while new or running."""
        return self.state if self.state in ("passed", "failed", "undecided") else None

    def to_tags(self) -> dict[str, str]:
        """The version's tags: extra, state tags, the audit's, the gate's (``fairness_gate`` = ``state`` last)."""
        tags = {str(k): tag_value(v) for k, v in self.extra.items()}
        tags.update({tag: tag_value(getattr(self, name)) for tag, name in self._STATE_TAGS if getattr(self, name) is not None})
        if self.audit is not None:
            tags.update(self.audit.to_tags())
        if self.gate is not None:
            tags.update(self.gate.to_tags())
        if self.promotion is not None:
            tags[PROMOTION_TAG] = self.promotion
        tags.pop(GATE_TAG, None)
        if self.state is not None:
            tags[GATE_TAG] = self.state
        return tags

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> VersionRecord:
        """A version's tags (or a :meth:`~faux_checks.registry.Registry.history` row) read back."""
        state = parse_text(tags.get(GATE_TAG))
        decided = any(t in tags for t in (CHECKED_AT_TAG, RUN_ID_TAG, FLAGGED_FRACTION_TAG))
        gate_tags = {k: v for k, v in tags.items() if k.startswith(PREFIX) and not k.startswith(AUDIT_TAG)
                     and k not in {t for t, _ in cls._STATE_TAGS}}
        extra = {k: v for k, v in tags.items() if not k.startswith(PREFIX)}
        return cls(state=state, gate=GateRecord.from_tags(gate_tags) if decided else None,
                   audit=AuditRecord.from_tags(tags) if AUDIT_TAG in tags else None,
                   promotion=parse_text(tags.get(PROMOTION_TAG)), extra=extra,
                   **{name: parse_text(tags.get(tag)) for tag, name in cls._STATE_TAGS})
