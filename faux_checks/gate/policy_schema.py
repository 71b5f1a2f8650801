"""The policy's schema: :class:`Policy`, the top-level model, and its two attribute forms.

One attribute (``protected = "COLUMN"``, with ``protected_kind`` and ``linked_columns``) or several
(``[[attributes]]`` tables, :class:`AttributeSettings`, and ``intersections``); after validation
:attr:`Policy.attributes` always lists every attribute. The sections are
:mod:`faux_checks.gate.policy_sections`; reading TOML files, shipped and recorded policies is
:mod:`faux_checks.gate.policy`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SerializeAsAny, field_validator, model_serializer, model_validator

from ..errors import InputError
from ..kinds import Kind
from .policy_sections import (AuditSettings, AuxSettings, DecisionSettings, FauxSettings, OperationsSettings,
                              ScaleSettings, Columns, LinkTables, ProtectedFileSettings,
                              ProtectedProbabilitiesSettings, list_as_tuple,
                              StrictSection)
from .tester_settings import TesterSettings

__all__ = ["Policy", "AttributeSettings", "INTERSECTION_SEPARATOR"]


#: Joins the columns of an intersection into the name of its derived column (``sex×race``) and a row's values
#: into its cell label (``Female×Black``).
INTERSECTION_SEPARATOR = "×"


class AttributeSettings(StrictSection):
    """One protected attribute of a gate that tests several (``[[attributes]]`` in the policy TOML).

    Each attribute gets its own check: its own auxiliary model, scores, rules and report section
    (:mod:`faux_checks.gate.attributes`). What is not set here is the policy's: ``[faux] admissible``
    (less the attribute itself), ``missing_protected``, every other section.
    """

    column: str = Field(..., min_length=1, description="The protected attribute's column.")
    kind: Kind | None = Field(
        None, description="binary, multiclass or continuous; inferred from the values when omitted "
        "(faux_checks.inputs.protected.encode_protected).")
    admissible: Columns | None = Field(
        None, description="Variant swap: this attribute's admissible columns, replacing [faux] admissible; None = "
        "[faux] admissible less this column.")
    linked_columns: LinkTables = Field(
        default_factory=dict, description="Columns tied to this attribute by definition: column -> {group: value}, "
        "{group: [values]} or {by = column, group: {value of that column: [values]}}; read by the linked_columns "
        "tester, which runs for the attributes that declare some.")


class Policy(StrictSection):
    """The gate policy.

    Attributes mirror the top-level keys and the TOML sections ``[faux]``, ``[aux]``, ``[decision]``,
    ``[testers.*]``, ``[linked_columns]``, ``[audit]``, ``[scale]``; see ``faux_checks/gate/policies/default.toml`` for every default explained.
    """

    name: str = "default"
    protected: str | None = Field(None, description="Protected attribute column (one attribute); a policy that "
                                  "tests several declares [[attributes]] instead.")
    attributes: Annotated[tuple[AttributeSettings, ...], BeforeValidator(list_as_tuple)] = Field(
        (), description="Several protected attributes, each checked on its own ([[attributes]] tables). With protected = "
        "\"COLUMN\" the loader reads that one as a list of one (dumped empty, as written).")
    intersections: Annotated[tuple[Columns, ...], BeforeValidator(list_as_tuple)] = Field(
        (), description="Intersections of declared binary/multi-class attributes, each checked as one multi-class "
        "attribute whose groups are the cells (e.g. [[\"sex\", \"race\"]] -> column 'sex×race').")
    label: str | None = Field(None, description="Label column (group metrics); excluded from features.")
    positive_label: str | None = Field(
        None, description="The label value meaning the positive class (text labels such as 'yes'); labels become 1 "
        "where equal, 0 elsewhere. Text labels without it are refused.")
    favourable_label: str | None = Field(
        None, min_length=1, description="The label value that is the favourable outcome for the person (\"no\" on a "
        "deny/default/fraud label, \">50K\" or \"1\" on an income label; compared as text, numbers by value). It "
        "sets the direction of the group table (rate of the favourable outcome, impact ratios, most favoured group) "
        "and of the report's sentences; unset, no group is called favoured. A value no row of the label holds is "
        "refused (faux_checks.gate.outcome).")
    missing_protected: Literal["error", "drop"] = Field(
        "error", description="Rows with a missing protected value: stop (error) or drop and count them."
    )
    missing_values: Literal["auto", "pass", "refuse"] = Field(
        "auto", description="Missing values in the target's input columns: 'auto' passes them as NaN to a target "
        "that takes NaN (XGBoost, LightGBM, a scikit-learn estimator or Pipeline that allows or imputes NaN) and "
        "refuses them, naming every column, for any other; 'pass' declares that the target takes NaN (an ONNX graph "
        "or module that handles it); 'refuse' always refuses (faux_checks.inputs.missing).")
    protected_kind: Kind | None = None
    target_output: Literal["auto", "logit", "probability", "softmax", "logits", "value"] = Field(
        "auto", description="How the target's output is read: a classifier's probability (auto, logit, probability, "
        "softmax, logits) or 'value', a regression output or score in its own unit ([faux] delta in [faux] unit).")
    target_class: int = Field(1, ge=0)
    min_aux_quality: float = Field(
        0.7, ge=0, le=1, description="The auxiliary model's held-out AUC (every group where it matters) or R² must "
        "reach this with the lower bound of its confidence interval; otherwise the gate is undecided.")
    max_rows: int | None = Field(None, ge=1, description="Audit at most this many rows (seeded sample); None = all.")
    seed: int = Field(0, ge=0, description="Seeds the auxiliary model, its hold-out split and every row sample.")
    faux: FauxSettings
    aux: AuxSettings = AuxSettings()
    testers: dict[str, SerializeAsAny[TesterSettings]] = Field(
        default_factory=dict, description="Each [testers.NAME] validated against the settings model of the entry NAME of "
        "faux_checks.gate.tester_table.TESTERS.")
    linked_columns: LinkTables = Field(
        default_factory=dict, description="Columns tied to the protected attribute by definition: column -> "
        "{group: value} (e.g. relationship = { Male = \"Husband\", Female = \"Wife\" }), {group: [values]} (many "
        "values per group), or {by = column, group: {value of that column: [values]}}; read by the linked_columns tester.")
    scale: ScaleSettings = ScaleSettings()
    audit: AuditSettings = AuditSettings()
    decision: DecisionSettings = DecisionSettings()
    operations: OperationsSettings = OperationsSettings()
    protected_file: ProtectedFileSettings | None = Field(
        None, description="The protected attribute in a separate file linked by a key ([protected_file]); None = "
        "the audit data holds the protected column(s).")
    protected_probabilities: ProtectedProbabilitiesSettings | None = Field(
        None, description="The protected attribute given only as per-row group probabilities "
        "([protected_probabilities], faux_checks.gate.estimated); None = the audit data holds c itself. Sets protected "
        "to its column when protected is not given.")

    @model_validator(mode="before")
    @classmethod
    def _estimated_attribute(cls, data: Any) -> Any:
        """``[protected_probabilities] column`` names the protected attribute when ``protected`` is not given; a
        second source of c (``[[attributes]]``, ``[protected_file]``, another ``protected``) is refused."""
        section = data.get("protected_probabilities") if isinstance(data, dict) else None
        column = section.get("column") if isinstance(section, dict) else getattr(section, "column", None)
        if not isinstance(column, str):                   # a section of the wrong type: the field's own error
            return data
        clash = ("[[attributes]]" if data.get("attributes") else "[protected_file]" if data.get("protected_file")
                 else f"protected = {data['protected']!r}" if data.get("protected") not in (None, column) else None)
        if clash:
            raise ValueError(f"[protected_probabilities] (column {column!r}) and {clash} both give the protected "
                             "attribute; keep one: the probabilities when c is only estimated, the other when c is known")
        return {**data, "protected": column} if column else data

    @field_validator("testers", mode="before")
    @classmethod
    def _tester_settings(cls, value):
        """Each ``[testers.NAME]`` validated against its table entry's settings model (unknown names: below)."""
        from .tester_table import validate_settings

        return validate_settings(value)

    @model_validator(mode="after")
    def _known_testers(self) -> "Policy":
        from .tester_table import ENTRY_POINT_GROUP, TESTERS, find_tester

        unknown = [name for name in self.testers if find_tester(name) is None]
        if unknown:
            raise ValueError(f"unknown tester(s) {sorted(unknown)}; known: {sorted(TESTERS)} and the installed "
                             f"packages' {ENTRY_POINT_GROUP!r} entry points")
        if self.protected in self.faux.admissible:
            raise ValueError(f"the protected attribute '{self.protected}' cannot be admissible")
        if self.protected in self.linked_columns:
            raise ValueError(f"the protected attribute '{self.protected}' cannot be one of its own linked columns")
        return self

    @model_validator(mode="after")
    def _delta_unit(self) -> "Policy":
        """A value target states δ's unit (``[faux] unit``); a classifier's δ is in probability points (no unit)."""
        if self.target_output == "value" and self.faux.unit is None:
            raise ValueError(f"target_output = 'value' reads the target's output in its own unit, but [faux] delta = "
                             f"{self.faux.delta:g} has no unit: set [faux] unit to the output's unit (e.g. unit = "
                             "\"EUR\" for a credit limit; δ is then a change in that unit)")
        if self.target_output != "value" and self.faux.cutoff is not None:
            raise ValueError(f"[faux] cutoff = {self.faux.cutoff:g} is set but target_output = {self.target_output!r} "
                             "reads a probability: a cut-off is read on a value target's output in its unit (set "
                             "target_output = 'value' and [faux] unit for a score or regression target, or remove cutoff)")
        if self.target_output != "value" and self.faux.unit is not None:
            raise ValueError(f"[faux] unit = {self.faux.unit!r} is set but target_output = {self.target_output!r} reads "
                             "a probability (δ in probability points, no unit): set target_output = 'value' for a "
                             "regression or score target, or remove unit")
        return self

    @model_validator(mode="after")
    def _one_or_several_attributes(self) -> "Policy":
        """Read ``protected`` (with ``protected_kind``, ``linked_columns``) as ``attributes = (that one,)``.

        Our reading (fairlearn normalises ``sensitive_features`` at its face): after
        validation :attr:`attributes` always lists every declared attribute, so consumers loop over it.
        The single-attribute form stays visible in :attr:`protected` (set only there) and is what the
        policy dumps and hashes (:meth:`_as_written`, :meth:`sha256`): recorded hashes and reports keep
        their values. The rewrite sets the field on the frozen model once, here, from values already
        validated (so an error is reported once, under the key the user wrote).
        """
        if self.protected is None and not self.attributes:
            raise ValueError("no protected attribute: set protected = \"COLUMN\" (one attribute) or declare "
                             "[[attributes]] tables with column = \"COLUMN\" (several)")
        if self.protected is not None:
            if self.attributes:
                raise ValueError(f"protected = {self.protected!r} and [[attributes]] {[a.column for a in self.attributes]} "
                                 "are both set; keep one (a policy with [[attributes]] names every protected "
                                 "attribute there)")
            if self.intersections:
                raise ValueError("intersections need [[attributes]] tables that declare their columns")
            links: dict[str, Any] = {"linked_columns": self.linked_columns} if self.linked_columns else {}   # none: no torch import
            object.__setattr__(self, "attributes", (AttributeSettings(column=self.protected, kind=self.protected_kind,
                                                                      **links),))
        elif self.protected_kind is not None:
            raise ValueError("protected_kind applies to protected = ...; with [[attributes]] set each one's kind")
        elif self.linked_columns:
            columns = [a.column for a in self.attributes]
            raise ValueError("with [[attributes]], declare linked_columns in the attribute they belong to "
                             f"(e.g. [[attributes]] column = {columns[0]!r}, linked_columns = {{ ... }}), not at the top")
        columns = [a.column for a in self.attributes]
        duplicates = sorted({c for c in columns if columns.count(c) > 1})
        if duplicates:
            raise ValueError(f"attributes {duplicates} are declared more than once")
        for a in self.attributes:
            if a.admissible is not None and a.column in a.admissible:
                raise ValueError(f"the protected attribute '{a.column}' cannot be admissible")
            if a.column in a.linked_columns:
                raise ValueError(f"the protected attribute '{a.column}' cannot be one of its own linked columns")
        kinds = {a.column: a.kind for a in self.attributes}
        names = set()
        for cross in self.intersections:
            unknown = [c for c in cross if c not in kinds]
            if unknown:
                raise ValueError(f"intersection {list(cross)} names {unknown}, not declared in [[attributes]] "
                                 f"(declared: {columns})")
            if len(cross) < 2 or len(set(cross)) != len(cross):
                raise ValueError(f"intersection {list(cross)} needs at least two different attributes")
            continuous = [c for c in cross if kinds[c] == "continuous"]
            if continuous:
                raise ValueError(f"intersection {list(cross)}: {continuous} is continuous; intersections cross "
                                 "groups (bin the attribute into a multi-class column first)")
            name = INTERSECTION_SEPARATOR.join(cross)
            if name in names or name in kinds:
                raise ValueError(f"intersection {list(cross)} is declared more than once")
            names.add(name)
        linked = self.testers.get("linked_columns")
        if linked is not None and linked.enabled and not any(a.linked_columns for a in self.attributes):
            raise ValueError("tester linked_columns is enabled but the policy declares no [linked_columns] table, e.g. "
                             "relationship = { Male = \"Husband\", Female = \"Wife\" }" if self.protected is not None
                             else "tester linked_columns is enabled but no attribute declares linked_columns")
        return self

    @model_serializer(mode="wrap")
    def _as_written(self, handler):
        """The policy as the user wrote it: a ``protected = "..."`` policy dumps ``attributes`` empty, as it did
        before the loader rewrote it (``report.json``'s ``policy``, recorded policies, :meth:`sha256`)."""
        data = handler(self)
        if self.protected is not None and "attributes" in data:
            data["attributes"] = data["attributes"][:0]
        return data

    @property
    def attribute_names(self) -> list[str]:
        """The protected attributes checked, in order: declared columns, then intersections (``sex×race``)."""
        return [a.column for a in self.attributes] + [INTERSECTION_SEPARATOR.join(c) for c in self.intersections]

    def single_protected(self, what: str) -> str:
        """The one protected attribute of a path that checks one at a time.

        Raises
        ------
        InputError
            The policy declares [[attributes]]: names them and the layer that checks several.
        """
        if self.protected is not None:
            return self.protected
        raise InputError(f"{what} checks one protected attribute; this policy declares {len(self.attribute_names)} "
                         f"({', '.join(self.attribute_names)}): run them through faux_checks.gate.attributes."
                         "check_attributes, or give a policy with protected = \"COLUMN\"")

    def attribute_policies(self) -> dict[str, "Policy"]:
        """One single-attribute policy per protected attribute (:attr:`attribute_names` order).

        A policy with ``protected`` gives an equal copy of itself. With ``[[attributes]]`` each attribute's policy
        has ``protected`` = its column and ``protected_kind`` = its kind, its own admissible columns
        (default: ``[faux] admissible`` less itself) and its own ``linked_columns`` (the
        ``linked_columns`` tester is disabled for an attribute that declares none). An
        intersection's policy names its derived column (``sex×race``, multi-class; the caller adds
        the column, :func:`faux_checks.gate.attributes.add_intersections`), holds none of its
        components admissible, and declares no linked columns.
        """
        base = self.model_dump()
        base.update(attributes=(), intersections=())

        def one(column: str, kind, admissible, linked) -> Policy:
            payload = {**base, "protected": column, "protected_kind": kind, "linked_columns": linked,
                       "faux": {**base["faux"], "admissible": tuple(admissible)}}
            if not linked and "linked_columns" in payload["testers"]:
                payload["testers"] = {**payload["testers"],
                                      "linked_columns": {**payload["testers"]["linked_columns"], "enabled": False}}
            return Policy.model_validate(payload)

        out = {}
        for a in self.attributes:
            admissible = a.admissible if a.admissible is not None else [c for c in self.faux.admissible if c != a.column]
            out[a.column] = one(a.column, a.kind, admissible, a.linked_columns)
        for cross in self.intersections:
            admissible = [c for c in self.faux.admissible if c not in cross]
            out[INTERSECTION_SEPARATOR.join(cross)] = one(INTERSECTION_SEPARATOR.join(cross), "multiclass", admissible, {})
        return out

    def sha256(self) -> str:
        """Hash of the canonical JSON form (provenance).

        ``attributes``, ``intersections``, ``positive_label`` and ``favourable_label`` count only when set, so a
        one-attribute policy keeps the hash it had before they existed (recorded decisions still match their
        policy); ``operations`` never counts.
        """
        payload = self.model_dump(mode="json")
        payload.pop("operations")           # deadlines and timeouts never change a decision
        payload["scale"].pop("device", None)  # nor does the device (recorded in the provenance)
        for key in ("attributes", "intersections", "positive_label", "favourable_label", "protected_file",
                    "protected_probabilities"):
            if not payload[key]:
                payload.pop(key)
        if payload.get("protected_file"):                 # where the file lies never changes a decision
            payload["protected_file"].pop("path", None)
        if payload.get("missing_values") == "auto":       # the default: a policy that does not set it keeps its hash
            payload.pop("missing_values")
        if payload["aux"].get("cross_fit_folds") == 5:    # the default, likewise
            payload["aux"].pop("cross_fit_folds")
        if payload["faux"].get("unit") is None:           # a classifier's policy keeps its hash
            payload["faux"].pop("unit", None)
        for key in ("cutoff", "cutoff_side"):             # a policy without a cut-off keeps its hash
            if payload["faux"].get(key) is None:
                payload["faux"].pop(key, None)
        if payload["decision"].get("max_newly_flagged_fraction") is None:   # the hash it had before the rule existed
            payload["decision"].pop("max_newly_flagged_fraction", None)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def with_overrides(self, **changes) -> "Policy":
        """A copy with top-level fields replaced (validated again)."""
        return Policy.model_validate({**self.model_dump(), **changes})

