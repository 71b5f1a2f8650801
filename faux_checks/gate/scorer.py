"""The policy's fAux tester for a target and its feature spec: one constructor for the in-memory and streaming checks.

For the default ``variant = "swap"`` the tester needs a reference fitted on rows the auxiliary
model learnt from (:func:`faux_checks.method.swap.fit_swap_reference`): it is fitted here, or
reused (the streaming plan fits it once on its sample and ships it to the workers).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .._device import resolve_device
from ..errors import InputError
from ..inputs.protected import ProtectedAttribute
from ..inputs.tabular import FeatureSpec
from ..kinds import protected_kind
from ..method.auxiliary import AuxiliaryModel
from ..method.counterfactual import SwapSettings
from ..method.faux import FAuxTester
from ..method.joint_move import with_joint_move
from ..method.output import TargetOutput
from ..method.swap import SwapReference
from .aux_cache import fitted_reference
from .policy_schema import Policy
from .rows import direct_derivative, swap_layout

__all__ = ["faux_tester", "swap_categorical"]


def swap_categorical(faux, target_model) -> Literal["coupled", "soft", "snap"]:
    """The one-hot reading of the swap move for this target: the policy's ``swap_categorical``, with ``"auto"`` resolved.

    ``"auto"`` is ``"snap"`` for a tree target (``piecewise_constant``: its splits read a fractional
    one-hot value as 0 or 1 by threshold) and ``"soft"`` for any other target. Our reading, from the
    bundled Adult data against the definitional truth (linked columns Husband ↔ Wife, 15,060 rows):
    soft flagged 5.4% (XGBoost) and 27.7% (LightGBM) where 12.2% and 11.9% are affected; snap flagged
    12.2% and 11.9% (docs/method.md, "Forward-only targets"). Differentiable and other forward-only
    targets keep soft, the reading the tester benchmark chose (docs/benchmark.md).

    Returns
    -------
    str
        ``"soft"`` or ``"snap"``.
    """
    if faux.swap_categorical != "auto":
        return faux.swap_categorical
    return "snap" if getattr(target_model, "piecewise_constant", False) else "soft"


def faux_tester(target_model, aux: AuxiliaryModel, policy: Policy, output: TargetOutput, spec: FeatureSpec,
                protected: ProtectedAttribute, *, reference: SwapReference | None = None,
                reference_rows: np.ndarray | None = None, reference_values: np.ndarray | None = None,
                holdout_rows: np.ndarray | None = None, holdout_values: np.ndarray | None = None,
                c_std: float = 1.0, chunk_size: int | None = None, progress: bool = False,
                probe_batches: bool = True, holds: tuple | None = None) -> FAuxTester:
    """The policy's fAux tester for a target with this feature spec.

    Parameters
    ----------
    target_model, aux : the target and the (fitted) auxiliary model
    policy : Policy
        Its ``[faux]`` settings choose the variant and, for swap, the admissible columns and options.
    output : TargetOutput
    spec : FeatureSpec
        The target's encoding (the protected column among its inputs adds the direct term).
    protected : ProtectedAttribute
    reference : SwapReference, optional
        Variant swap: a reference fitted before (reused as is).
    reference_rows : ndarray of shape (n_ref, d), optional
        Variant swap without ``reference``: encoded rows the auxiliary model learnt from.
    reference_values : ndarray of shape (n_ref,), optional
        Their protected values (group index or continuous value).
    holdout_rows, holdout_values : ndarray of shape (n_hold, d) and (n_hold,), optional
        Encoded rows the auxiliary model did not train on, and their protected values: with the
        policy's ``hold_uninformative``, feature groups that tell it nothing about c there are held fixed.
    c_std : float
        Standard deviation of a continuous protected attribute (its direct step is one sd); computed from
        ``reference_values`` when they are given.
    probe_batches : bool
        Probe both models for batch dependence on every evaluation (:class:`~faux_checks.FAuxTester`).
    holds : (held, informativeness, independence, joint), optional
        Variant swap: the features held besides the declared ones (bool (d_aux,)) and the tests' tables (``joint``: the held block's joint test), judged
        elsewhere (:func:`faux_checks.gate.crossfit.pooled_holds`, on every audited row); the reference is fitted
        with them held and ``holdout_rows`` is not read.

    Raises
    ------
    InputError
        Admissible columns that are not target inputs, too few reference rows per group, and the
        tester's own input errors.
    """
    faux = policy.faux
    uses_direct = protected.name in spec.source_columns
    mask, dx_dc = (direct_derivative(spec, protected) if uses_direct
                   else (np.zeros(spec.n_features, dtype=bool), None))
    kwargs = ({"probe_batches": probe_batches, "device": resolve_device(policy.scale.device)}
              | ({} if chunk_size is None else {"chunk_size": chunk_size}))
    if faux.variant != "swap":
        return FAuxTester(target_model, aux, variant=faux.variant, output=output, ridge=faux.ridge,
                          protected_mask=mask if uses_direct else None, dx_dc_direct=dx_dc,
                          ig_baseline=faux.ig_baseline, ig_steps=faux.ig_steps, progress=progress, **kwargs)
    if not protected_kind(protected.kind).grouped and reference_values is not None:
        c_std = float(np.std(reference_values))
    layout = swap_layout(spec, protected, faux.admissible, c_std=c_std)
    if layout.admissible.all():
        raise InputError("every feature is declared admissible: nothing is left that could carry the protected "
                         "attribute, so the swap reading has nothing to test; declare fewer admissible columns")
    settings = SwapSettings(steps=faux.swap_steps, evaluation=faux.swap_evaluation,
                            categorical=swap_categorical(faux, target_model), categorical_groups=layout.categorical_groups,
                            line_search=faux.swap_line_search, coupling=faux.swap_coupling)
    tester = FAuxTester(target_model, aux, variant="swap", output=output, swap=settings,
                        protected_mask=mask if uses_direct else None, direct_levels=layout.direct_levels,
                        progress=progress, **kwargs)
    if reference is not None:
        tester.reference = reference
        return tester
    assert reference_rows is not None               # every caller passes a reference or the rows to fit one on
    return _fit_reference(tester, layout, faux, reference_rows, reference_values, holds=holds,
                          holdout_rows=holdout_rows, holdout_values=holdout_values)


def _fit_reference(tester: FAuxTester, layout, faux, reference_rows: np.ndarray, reference_values, *,
                   holds: tuple | None, holdout_rows: np.ndarray | None, holdout_values) -> FAuxTester:
    """The swap tester with its reference fitted on ``reference_rows``: with ``holds``, the features judged
    elsewhere held besides the admissible ones (their tests kept on the tester); else the policy's
    ``hold_uninformative`` reads ``holdout_rows``."""
    if holds is not None:
        held, informativeness, independence, joint = holds
        fitted_reference(tester, reference_rows[:, layout.keep], reference_values,
                         admissible=layout.admissible | np.asarray(held, dtype=bool), metric=faux.swap_metric,
                         holdout=None, feature_groups=layout.feature_groups, guard=faux.swap_guard,
                         continuous_matching=faux.continuous_matching, hold_independent=False)
        tester.held_fixed_ = np.asarray(held, dtype=bool).copy()
        tester.informativeness_, tester.independence_ = list(informativeness), list(independence)
        tester.joint_hold_ = joint                     # the held block's joint test, on every audited row
        tester.reference = with_joint_move(tester.reference, joint, reference_rows[:, layout.keep], reference_values)
        return tester
    holdout = None
    if faux.hold_uninformative and holdout_rows is not None and len(holdout_rows) >= 2:
        holdout = (holdout_rows[:, layout.keep], holdout_values)
    return fitted_reference(tester, reference_rows[:, layout.keep], reference_values, admissible=layout.admissible,
                            metric=faux.swap_metric, holdout=holdout, feature_groups=layout.feature_groups,
                            guard=faux.swap_guard, continuous_matching=faux.continuous_matching,
                            hold_independent=faux.hold_independent)
