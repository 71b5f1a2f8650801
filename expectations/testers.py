"""Each entry of the tester table as a Great Expectations expectation: the shipped classes, or one built from the entry.

The shipped testers keep their documented classes (:mod:`.baselines`: their type names are in stored
suites). A per-individual tester registered in :data:`faux_checks.gate.tester_table.TESTERS` without one gets a
metric provider (``faux.NAME``, :func:`.baseline_metrics._tester_flagged_fraction`: the check's numbers reused, else
:func:`faux_checks.gate.testers.baseline_scores` on the rows) and an expectation
``Expect{gx_name}FlaggedFractionToBeAtMost`` whose fields are ``threshold``, ``max_flagged_fraction``,
``gating`` and the entry's ``params`` (types and defaults from its settings model; the settings model
validates them again when the metric runs). They are built once per process, on first use; defining
them registers them with GX.
"""

from __future__ import annotations

from typing import Any, ClassVar

from great_expectations.compatibility import pydantic

from faux_checks.errors import InputError
from faux_checks.gate.tester_table import TESTERS

from .baseline_metrics import tester_metric_provider
from .baselines import (
    KEYS,
    ExpectDemographicParityDifferenceToBeAtMost,
    ExpectEqualizedOddsDifferenceToBeAtMost,
    ExpectFlipTestFlaggedFractionToBeAtMost,
    ExpectFtaFlaggedFractionToBeAtMost,
    ExpectFtuFlipFlaggedFractionToBeAtMost,
    ExpectLinkedColumnsFlaggedFractionToBeAtMost,
    ExpectUnfairMapFlaggedFractionToBeAtMost,
    ExpectWeightedFtaFlaggedFractionToBeAtMost,
    TesterFlaggedFractionExpectation,
)

__all__ = ["SHIPPED_EXPECTATIONS", "expectation_for", "tester_expectation"]

#: The shipped testers' hand-written expectation classes (their GX type names are stable).
SHIPPED_EXPECTATIONS: dict[str, type] = {
    "fta": ExpectFtaFlaggedFractionToBeAtMost,
    "weighted_fta": ExpectWeightedFtaFlaggedFractionToBeAtMost,
    "unfair_map": ExpectUnfairMapFlaggedFractionToBeAtMost,
    "fliptest": ExpectFlipTestFlaggedFractionToBeAtMost,
    "ftu_flip": ExpectFtuFlipFlaggedFractionToBeAtMost,
    "linked_columns": ExpectLinkedColumnsFlaggedFractionToBeAtMost,
    "demographic_parity": ExpectDemographicParityDifferenceToBeAtMost,
    "equalized_odds": ExpectEqualizedOddsDifferenceToBeAtMost,
}
_BUILT: dict[str, type] = {}


def tester_expectation(name: str) -> type:
    """The GX expectation class of tester ``name`` (built from its table entry when it has no shipped class).

    Raises
    ------
    InputError
        ``name`` is not in the tester table, or is a group metric without a shipped expectation.
    """
    if name in SHIPPED_EXPECTATIONS:
        return SHIPPED_EXPECTATIONS[name]
    tester = TESTERS.get(name)
    if tester is None:
        raise InputError(f"policy tester '{name}' is not in the tester table (known: {sorted(TESTERS)}); register it "
                         "with faux_checks.gate.tester_table.register_tester")
    if not tester.per_individual:
        raise InputError(f"policy tester '{name}' is a group metric ({tester.statistic}) with no Great Expectations "
                         "expectation; add one in expectations/ or disable it in the policy")
    built = _BUILT.get(name)
    if built is None or built._entry is not tester:      # re-registered under the same name: build again
        built = _BUILT[name] = _build(tester)
    return built


def _build(tester) -> type:
    metric = f"faux.{tester.name}"
    tester_metric_provider(f"{tester.gx_name}FlaggedFraction", tester.name, metric,
                            f"``{metric}``: {tester.summary or tester.label} against ``threshold``.")
    fields = tester.settings.model_fields
    namespace: dict[str, Any] = {
        "__annotations__": {**{k: fields[k].annotation for k in tester.params},
                            "_metric": ClassVar[str], "_tester": ClassVar[str], "_entry": ClassVar[Any]},
        **{k: pydantic.Field(fields[k].default, description=fields[k].description or k) for k in tester.params},
        "__doc__": (f"Expect the share of individuals whose {tester.label} score ({tester.summary or 'per individual'}) "
                    "exceeds threshold to be at most max_flagged_fraction (built from the tester table)."),
        "__module__": __name__,
        "metric_dependencies": (metric,),
        "success_keys": KEYS + tester.params,
        "args_keys": ("column",) + KEYS + tester.params,
        "_metric": metric, "_tester": tester.name, "_entry": tester,
    }
    return type(f"Expect{tester.gx_name}FlaggedFractionToBeAtMost", (TesterFlaggedFractionExpectation,), namespace)


def expectation_for(name: str, settings, *, label: str | None, **common):
    """The expectation of tester ``name`` with the policy's ``settings`` (``common``: column, model_path, …).

    Raises
    ------
    InputError
        As :func:`tester_expectation`; or the tester needs a label column and the policy names none.
    """
    cls = tester_expectation(name)
    tester = TESTERS.get(name)
    if tester is not None and tester.needs_label and not label:
        raise InputError(f"testers.{name} is enabled but the policy names no label column; "
                         "set label = \"...\" or disable the tester")
    if tester is None or tester.per_individual:
        params = tester.params if tester is not None else ()
        return cls(**common, threshold=settings.threshold, max_flagged_fraction=settings.max_flagged_fraction,
                   gating=settings.gating, **{k: getattr(settings, k) for k in params})
    return cls(**common, threshold=settings.threshold, gating=settings.gating)
