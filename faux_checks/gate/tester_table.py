"""The baseline testers the policy may name, one table entry each: settings model, capability flags, scorer.

:data:`TESTERS` is the one place a tester is declared. The policy validates ``[testers.NAME]`` against the
entry's ``settings`` model and refuses names missing from the table (:class:`~faux_checks.gate.policy.Policy`);
:func:`~faux_checks.gate.testers.run_baselines` runs the entries the policy enables; "not applicable" is derived
from the entry's flags (:func:`not_applicable`), not written per tester; the Great Expectations metric and
expectation of an entry are built from it (``faux_checks_gx.testers.tester_expectation``).

A new tester is one module (its class in :mod:`faux_checks.baselines`, or anywhere) and one
:func:`register_tester` call (or one line in :data:`TESTERS` for a shipped one)::

    register_tester(Tester("my_tester", scores=my_scores, needs_gradients=True, gx_name="MyTester"))

where ``my_scores(call: TesterCall) -> (scores of shape (n,) or None, description)``.

A tester shipped in another package needs no edit of this one: the package declares an entry point in the group
:data:`ENTRY_POINT_GROUP` whose name is the tester's policy key and whose object is its :class:`Tester` (as MLflow
finds evaluators, ``mlflow.model_evaluator``)::

    # the plugin's pyproject.toml
    [project.entry-points."faux_checks.testers"]
    my_tester = "my_package.testers:MY_TESTER"

A policy naming ``[testers.my_tester]`` then loads it (:func:`find_tester`); entry points are loaded only for the
names a policy uses, so a broken plugin stops only the policies that name it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, cast

import numpy as np

from ..errors import InputError
from ..kinds import protected_kind
from .tester_settings import TesterSettings

__all__ = ["ENTRY_POINT_GROUP", "TESTERS", "Tester", "TesterCall", "find_tester", "not_applicable", "register_tester",
           "validate_settings", "value_not_applicable"]

#: The entry-point group third-party testers are declared in (entry point name = the tester's policy key).
ENTRY_POINT_GROUP = "faux_checks.testers"


#: Settings names a tester's ``params`` may not use: the fields every tester's GX expectation has already.
RESERVED_PARAMS = frozenset({"column", "model_path", "feature_spec_path", "aux_model_path", "policy_json", "threshold",
                             "max_flagged_fraction", "gating", "enabled"})


@dataclass(frozen=True)
class TesterCall:
    """What a per-individual tester's scorer receives (one audited attribute of one check).

    Attributes
    ----------
    settings : TesterSettings
        The policy's ``[testers.NAME]`` (an instance of the entry's ``settings`` model).
    target_model : torch.nn.Module or ForwardOnlyTarget
    output : TargetOutput
        The target's resolved output form.
    audit : AuditRows
        The audited rows: ``X`` (n, d) encoded, ``protected``, ``values`` (n,), ``feature_spec``, ``frame``.
    seed : int
        The policy's seed.
    links : mapping
        The policy's ``[linked_columns]``.
    """

    settings: TesterSettings
    target_model: Any
    output: Any
    audit: Any
    seed: int = 0
    links: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tester:
    """One baseline tester: its name, settings model, capability flags and scorer.

    Attributes
    ----------
    name : str
        The policy key (``[testers.NAME]``) and the report's.
    scores : callable or None
        ``scores(call: TesterCall) -> (ndarray of shape (n,) or None, str)``: per-individual scores and the
        flagging rule in words (None and "not applicable: …" when the tester does not fit beyond what the
        flags say). None for a group metric (``statistic`` names it).
    settings : type of TesterSettings
        The pydantic model ``[testers.NAME]`` validates against (a subclass for extra knobs).
    params : tuple of str
        The settings fields the scorer reads beyond ``threshold`` (compared with a hand-built GX
        expectation's, passed to it by the suite).
    needs_gradients : bool
        Differentiates the target: not applicable to a forward-only target (ONNX, trees, scikit-learn).
    needs_groups : bool
        Compares protected groups: not applicable to a continuous protected attribute.
    needs_protected_input : bool
        Changes the protected attribute's own input columns: not applicable when the target does not take it.
    needs_label : bool
        Reads the label column (a group metric: not computed, and refused by the suite, without one).
    needs_probability : bool
        Reads the target's output as a probability (log-odds, a 0.5 cut-off): not applicable to a target that
        returns a value in its own unit (policy ``target_output = "value"``).
    statistic : str
        ``"flagged_fraction"`` for a per-individual tester (share of rows over ``threshold``, at most
        ``max_flagged_fraction``), else the group metric's name (``demographic_parity_difference``).
    label : str
        The tester in words, for messages ("FlipTest"); default ``name``.
    groups_reason : str
        Why groups are needed, for the "not applicable" message; default "{label} needs protected groups".
    gx_name : str
        CamelCase stem of its GX classes (``Expect{gx_name}FlaggedFractionToBeAtMost``); default from ``name``.
    summary : str
        One line on what the score measures (the generated GX expectation's docstring).
    """

    name: str
    scores: Callable[[TesterCall], tuple[np.ndarray | None, str]] | None = None
    settings: type[TesterSettings] = TesterSettings
    params: tuple[str, ...] = ()
    needs_gradients: bool = False
    needs_groups: bool = False
    needs_protected_input: bool = False
    needs_label: bool = False
    needs_probability: bool = False
    statistic: str = "flagged_fraction"
    label: str = ""
    groups_reason: str = ""
    gx_name: str = ""
    summary: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise InputError(f"tester name {self.name!r} must be an identifier (it is a policy key)")
        if self.per_individual and self.scores is None:
            raise InputError(f"tester {self.name!r}: a per-individual tester needs scores=")
        if not (isinstance(self.settings, type) and issubclass(self.settings, TesterSettings)):
            raise InputError(f"tester {self.name!r}: settings must subclass TesterSettings, got {self.settings!r}")
        missing = [p for p in self.params if p not in self.settings.model_fields]
        if missing:
            raise InputError(f"tester {self.name!r}: params {missing} are not fields of {self.settings.__name__}")
        taken = [p for p in self.params if p in RESERVED_PARAMS]
        if taken:
            raise InputError(f"tester {self.name!r}: params {taken} are names the GX expectations use already "
                             f"({sorted(RESERVED_PARAMS)}); rename the settings field")
        object.__setattr__(self, "label", self.label or self.name)
        object.__setattr__(self, "groups_reason", self.groups_reason or f"{self.label} needs protected groups")
        object.__setattr__(self, "gx_name", self.gx_name or "".join(w.title() for w in self.name.split("_")))

    @property
    def per_individual(self) -> bool:
        """True for a per-individual tester (flagged fraction), False for a group metric."""
        return self.statistic == "flagged_fraction"


def not_applicable(tester: Tester, target_model, audit, output=None) -> str | None:
    """Why ``tester`` does not apply to this target and attribute, read from its flags; None when it applies.

    ``output`` is the target's resolved :class:`~faux_checks.method.output.TargetOutput` (None: a probability).
    Checked in order: a probability of a value target, gradients of a forward-only target, the protected input missing from the target's
    inputs, groups of a continuous attribute (our reading of each tester's paper: FTA, weighted FTA and
    Unfair Map differentiate f; FTU flip changes c's own input; FlipTest and linked columns map between groups).
    """
    from ..method.forward import is_forward_only

    protected = audit.protected
    if tester.needs_probability and getattr(output, "form", None) == "value":
        return value_not_applicable(tester)
    if tester.needs_gradients and is_forward_only(target_model):
        return (f"not applicable: {tester.name} needs the target's input gradient; the target is forward-only "
                f"({target_model.access})")
    if tester.needs_protected_input and protected.name not in audit.feature_spec.source_columns:
        return "not applicable: the target does not take the protected attribute as input"
    if tester.needs_groups and not protected_kind(protected.kind).grouped:
        return f"not applicable: {tester.groups_reason} (the protected attribute is continuous)"
    return None


def value_not_applicable(tester: Tester) -> str:
    """The "not applicable" text of a tester that needs a probability, for a target that returns a value."""
    return (f"not applicable: {tester.label} reads the target's output as a probability; the target returns a value "
            "in its own unit (target_output = 'value')")


# ---------------------------------------------------------------------------------- shipped scorers
def _fta(call: TesterCall):
    from ..baselines.fta import FTATester

    s = call.settings
    return (FTATester(call.target_model, output=call.output, p=s.p).score(call.audit.X),
            f"‖∇f‖_{s.p:g} > {s.threshold:g}")


def _weighted_fta(call: TesterCall):
    from ..baselines.weighted_fta import WeightedFTATester

    s, audit = call.settings, call.audit
    tester = WeightedFTATester(call.target_model, kind=audit.protected.kind, subspace=s.subspace, p=s.p,
                               output=call.output).fit(audit.X, audit.values)
    proj = "P_S" if s.subspace == "sensitive" else "(I − P_S)"
    return tester.score(audit.X), f"‖{proj} ∇f‖_{s.p:g} > {s.threshold:g} (sensitive subspace of a linear model of c)"


def _unfair_map(call: TesterCall):
    from ..baselines.unfair_map import UnfairMapTester

    s, audit = call.settings, call.audit
    tester = UnfairMapTester(call.target_model, kind=audit.protected.kind, steps=s.steps, step_size=s.step_size,
                             penalty=s.penalty, output=call.output).fit(audit.X, audit.values)
    return (tester.score(audit.X), f"Unfair Map loss ratio > {s.threshold:g} ({s.steps} steps, η = {s.step_size:g}, "
            f"λ = {s.penalty:g})")


def _fliptest(call: TesterCall):
    from ..baselines.fliptest import FlipTestTester

    s = call.settings
    tester = FlipTestTester(call.target_model, method=s.method, max_n=s.max_n, reg=s.reg, seed=call.seed,
                            output=call.output)
    return (tester.score(call.audit.X, call.audit.values),
            f"|f(x) − f(T(x))| > {s.threshold:g} (FlipTest, {s.method} transport)")


def _ftu_flip(call: TesterCall):
    from ..baselines.ftu import FTUFlipTester
    from .direct import direct_derivative, encoded_level

    audit, protected = call.audit, call.audit.protected
    spec = audit.feature_spec
    mask, _ = direct_derivative(spec, protected)
    enc = spec.columns[spec.source_columns.index(protected.name)]
    if int(mask.sum()) == 1 and len(protected.groups) != 2:
        return None, "not applicable: the protected attribute's input column is not a two-level code or a one-hot group"
    levels = (0.0, 1.0)
    if int(mask.sum()) == 1:                        # two groups here (returned above otherwise)
        levels = cast("tuple[float, float]", tuple(float(encoded_level(enc, g)[0]) for g in protected.groups))
    tester = FTUFlipTester(call.target_model, protected_columns=mask, levels=levels, output=call.output)
    return tester.score(audit.X), f"|f(x) − f(x with the protected input flipped)| > {call.settings.threshold:g} (FTU flip)"


def _linked_columns(call: TesterCall):
    """The linked-columns tester on the audited rows (the policy's links checked against the data and the spec).

    Returns ``(scores of shape (n,), description)``: |Δŷ| in probability points, the mean over each group's tied values.
    """
    from ..baselines.linked_columns import LinkedColumnsTester, check_links, parse_links
    from ..method.output import predict_probability

    target_model, output, audit, links = call.target_model, call.output, call.audit, call.links or {}
    thr = f"{call.settings.threshold:g}"
    protected, spec = audit.protected, audit.feature_spec
    frame = audit.frame
    levels = {enc.name: tuple(enc.levels) + tuple(raw for raw, _ in enc.aliases)      # aliased values are known
              for enc in spec.columns if enc.kind == "categorical"}
    check_links(links, columns=list(frame.columns), groups=protected.groups, levels=levels)
    predict = lambda f: predict_probability(target_model, spec.encode(f), output)   # noqa: E731
    tester = LinkedColumnsTester(predict, protected=protected.name, links=links, groups=protected.groups)
    declared = ", ".join(f"{link.column}: " + " ↔ ".join(
        f"{g}=" + "/".join(dict.fromkeys(v for vals in table.values() for v in vals)) for g, table in link.values.items())
        + (f" (by {link.by})" if link.by else "") for link in parse_links(links))
    both = tester.scores(frame, audit.values)
    many = any(len(vals) > 1 for link in parse_links(links) for table in link.values.values() for vals in table.values())
    note = (f"; mean over each group's tied values, the largest of them flags {np.mean(both['max'] > float(thr)):.2%}"
            if many else "")
    return (both["mean"],
            f"|f(x) − f(x in the other group, linked values mapped)| > {thr} (linked columns {declared}{note})")


#: name -> entry; the policy's ``[testers.*]`` keys, in report order. Extend with :func:`register_tester`.
TESTERS: dict[str, Tester] = {t.name: t for t in (
    Tester("fta", _fta, params=("p",), needs_gradients=True, label="FTA", gx_name="Fta",
           summary="‖∇f‖_p of the audited rows (FTA, John et al. 2020)"),
    Tester("weighted_fta", _weighted_fta, params=("p", "subspace"), needs_gradients=True, label="weighted FTA",
           gx_name="WeightedFta", summary="‖P_S ∇f‖_p of the audited rows"),
    Tester("unfair_map", _unfair_map, params=("steps", "step_size", "penalty"), needs_gradients=True, needs_probability=True,
           label="Unfair Map", gx_name="UnfairMap", summary="Unfair Map loss ratio of the audited rows"),
    Tester("fliptest", _fliptest, params=("method", "max_n", "reg"), needs_groups=True, label="FlipTest",
           gx_name="FlipTest", summary="FlipTest output change of the audited rows"),
    Tester("ftu_flip", _ftu_flip, needs_protected_input=True, needs_groups=True, label="FTU flip",
           gx_name="FtuFlip", summary="FTU flip output change of the audited rows"),
    Tester("linked_columns", _linked_columns, needs_groups=True, label="linked columns",
           groups_reason="linked columns map values between protected groups", gx_name="LinkedColumns",
           summary="|Δŷ| under the policy's linked-columns counterfactual"),
    Tester("demographic_parity", statistic="demographic_parity_difference", needs_probability=True,
           label="demographic parity",
           gx_name="DemographicParityDifference"),
    Tester("equalized_odds", statistic="equalized_odds_difference", needs_label=True, needs_probability=True,
           label="equalized odds",
           gx_name="EqualizedOddsDifference"),
)}


def register_tester(tester: Tester, *, replace: bool = False) -> Tester:
    """Add ``tester`` to :data:`TESTERS` (the policy, the check and the GX suite then know it).

    Raises
    ------
    InputError
        A tester of that name exists and ``replace`` is False.
    """
    if tester.name in TESTERS and not replace:
        raise InputError(f"a tester named {tester.name!r} is registered already; pass replace=True to replace it")
    TESTERS[tester.name] = tester
    return tester


def find_tester(name: str) -> Tester | None:
    """The tester named ``name``: from :data:`TESTERS`, else from an installed entry point of that name (registered).

    Parameters
    ----------
    name : str
        The policy key (``[testers.NAME]``).

    Returns
    -------
    Tester or None
        None when neither the table nor any installed package's :data:`ENTRY_POINT_GROUP` entry point has it.

    Raises
    ------
    InputError
        The entry point cannot be imported, its object is not a :class:`Tester`, or its tester's name differs from
        the entry point's; the message names the entry point and the package that declares it.
    """
    if name in TESTERS:
        return TESTERS[name]
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        return None
    ep = found[0]
    where = f"entry point {ep.name} = {ep.value!r} (group {ENTRY_POINT_GROUP!r}" + (
        f", package {ep.dist.name} {ep.dist.version})" if ep.dist is not None else ")")
    try:
        tester = ep.load()
    except Exception as exc:     # noqa: BLE001 - a plugin's import may raise anything; named and refused here
        raise InputError(f"tester {name!r}: {where} failed to load: {type(exc).__name__}: {exc}") from None
    if not isinstance(tester, Tester):
        raise InputError(f"tester {name!r}: {where} is a {type(tester).__name__}, expected a "
                         "faux_checks.gate.tester_table.Tester")
    if tester.name != name:
        raise InputError(f"tester {name!r}: {where} holds the tester {tester.name!r}; the entry point's name must be "
                         "the tester's policy key")
    return register_tester(tester)


def validate_settings(value):
    """The policy's ``testers`` table with each known entry validated against its tester's settings model.

    Unknown names are left as they are (the policy refuses them by name). A ``ValidationError``
    keeps pydantic's locations (``testers.NAME.field``).
    """
    from pydantic import ValidationError
    from pydantic_core import ValidationError as CoreValidationError

    if not isinstance(value, dict):
        return value
    out = {}
    for name, raw in value.items():
        entry = find_tester(str(name))
        if entry is None or isinstance(raw, entry.settings):
            out[name] = raw
            continue
        try:
            out[name] = entry.settings.model_validate(raw)
        except ValidationError as exc:
            raise CoreValidationError.from_exception_data(exc.title, [
                {"type": e["type"], "loc": (name, *e["loc"]), "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e else {})}
                for e in exc.errors()]) from None
    return out
