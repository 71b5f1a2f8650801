"""A baseline tester's policy settings (``[testers.NAME]``): the model each tester's entry validates against.

Every shipped tester validates against :class:`TesterSettings`; a plug-in tester whose knobs differ
subclasses it and names the subclass in its :class:`~faux_checks.gate.tester_table.Tester` entry
(``settings=``). The policy validates ``[testers.NAME]`` against that entry's model
(:meth:`faux_checks.gate.policy.Policy`'s ``testers``), so a typo or a wrong type is an error there.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TesterSettings"]


class TesterSettings(BaseModel):
    """A baseline tester: whether it runs, and its threshold (reported; ``gating`` makes it decide too)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    enabled: bool = True
    threshold: float = Field(..., ge=0, description="Score above which an individual (or the model, for group metrics) is flagged.")
    max_flagged_fraction: float | None = Field(None, ge=0, le=1, description="For per-individual testers.")
    gating: bool = Field(False, description="If true, exceeding the limit fails the gate as fAux does.")
    p: float = Field(2.0, ge=1, description="ℓp norm (FTA, weighted FTA).")
    subspace: Literal["sensitive", "complement"] = Field(
        "sensitive", description="Weighted FTA: score P_S ∇f (sensitive subspace) or (I − P_S) ∇f.")
    steps: int = Field(20, ge=1, le=1000, description="Unfair Map: gradient-ascent steps.")
    step_size: float = Field(0.1, gt=0, description="Unfair Map: step η (encoded-feature units per unit gradient).")
    penalty: float = Field(1.0, ge=0, description="Unfair Map: λ of the fair-metric penalty.")
    method: Literal["exact", "sinkhorn", "quantile"] = Field(
        "exact", description="FlipTest: exact OT, entropic OT, or the per-feature quantile map.")
    max_n: int = Field(2000, ge=2, description="FlipTest (exact/sinkhorn): rows per group in the OT problem.")
    reg: float = Field(0.01, gt=0, description="FlipTest (sinkhorn): entropic regularisation.")
