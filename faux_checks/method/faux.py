"""The fAux tester: streams individuals through gradients and LIC scores in bounded memory.

One class, one verb (docs/architecture.md, "How code reads"): :class:`FAuxTester` holds the
target model, the auxiliary model and the method settings; :meth:`FAuxTester.score` returns (n,)
LIC scores and :meth:`FAuxTester.evaluate` the full per-individual result (scores, undefined
rows, evidence).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np
import torch

from .._device import module_on
from .._threads import one_blas_thread, one_thread
from .._validation import fmt_count
from ..errors import InputError
from ..kinds import protected_kind
from ._batching import DEFAULT_CHUNK, as_tensor, eval_mode, iter_chunks
from .auxiliary import AuxiliaryModel
from .batch_probe import probe_batch_independence
from .chunk import swap_chunk
from .forward import FD_STEP, directional_change, forward_attribution, is_forward_only
from .gradients import path_averaged_gradients, target_probability_and_gradient
from .counterfactual import SwapSettings, fit_floors
from .held import reference_holds
from .joint_move import with_joint_move
from .levels import fit_level_models
from .lic import faux_ng_scores, faux_projection_scores, faux_scores, pseudo_inverse_rows
from .reference_rows import capped_reference
from .output import TargetOutput, float64_copy, predict_probability, probability, raw_output, resolve_output_form
from .result import LICResult
from .swap import SwapReference, fit_swap_reference

__all__ = ["FAuxTester", "Variant", "VARIANTS"]

Variant = Literal["swap", "faux", "ng", "ig", "projection"]
VARIANTS: tuple[str, ...] = ("swap", "faux", "ng", "ig", "projection")


class FAuxTester:
    """fAux individual-fairness tester (Castiglione et al. 2022, eq. 9 and 10).

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
        x (b, d) ↦ output; read as declared by ``output``. Never modified: put in eval mode only
        for each call.
    aux_model : AuxiliaryModel
        Fitted on the target's features minus ``protected_mask`` columns.
    variant : {"swap", "faux", "ng", "ig", "projection"}
        ``"swap"``: the change of ŷ in probability points when c changes to the other group(s)
        (our reading, :mod:`faux_checks.method.swap`; needs ``reference``); ``"faux"``: eq. 9 with gradients; ``"ng"``: eq. 10 (normalised gradients);
        ``"ig"``: eq. 9 with path-averaged integrated gradients (captum); ``"projection"``:
        ‖g‖·|cos(g, a)| (our reading of the paper's Fig. 1, :func:`faux_checks.method.lic.faux_projection_scores`).
    output : TargetOutput
        Output form of the target and the tested class.
    ridge : float
        Damping λ of (JJᵀ + λI) (docs/method.md, open point 2).
    protected_mask : bool array of shape (d,), optional
        Encoded features that are the protected attribute itself (C09). They are removed from
        the aux model's input and their effect enters as a direct term.
    dx_dc_direct : array of shape (d, k), optional
        ∂x/∂c for those features (e.g. the encoded difference between group j and group 0).
    ig_baseline : {"mean", "zeros"} or array of shape (d,)
        Integrated-gradients path start (docs/method.md, open point 4); "mean" is the mean of all rows
        of X passed to :meth:`evaluate` (so IG scores depend on the scored set; give an array,
        e.g. the training mean, for scores that do not).
    ig_steps : int
    reference : SwapReference, optional
        Variant swap: the metric and group shifts fitted on reference rows.
    swap : SwapSettings
        Variant swap: steps, evaluation, categorical handling.
    direct_levels : array of shape (m, d_c) or (1, d_c), optional
        Variant swap with c's own columns as inputs: their encoding per group (continuous: their
        change per +1 sd of c).
    chunk_size : int
        Rows per chunk; bounds memory.
    progress : bool
        tqdm bar over chunks.
    probe_batches : bool
        Probe both models for batch dependence (:func:`probe_batch_independence`) on every
        :meth:`evaluate` call; the streaming scorer probes once per stream and turns this off.
    fd_step : float
        Variant faux with a forward-only target (:class:`~faux_checks.method.forward.ForwardOnlyTarget`):
        the central finite difference's largest feature move, in the feature's encoded scale
        (:func:`~faux_checks.method.forward.directional_change`).
    device : str or torch.device
        Variant swap: where each chunk is scored ("cpu", "cuda"). On CUDA the target and the aux network are
        copied there once per :meth:`evaluate` (the given modules are never moved) and each chunk moves there
        once; the (b, d) tensors of the move stay there, the per-row quantile matching of the aux output and
        the level couplings read (b,)-sized host copies. A forward-only target (trees, ONNX, scikit-learn)
        is scored on the CPU. What ran is in ``device_used_`` (the check's provenance ``device``). Other
        variants run on the CPU.
    """

    name = "faux"
    needs_protected_input = False

    def __init__(
        self,
        target_model,
        aux_model: AuxiliaryModel,
        *,
        variant: Variant = "faux",
        output: TargetOutput = TargetOutput(),  # noqa: B008 - frozen dataclass, immutable default
        ridge: float = 0.0,
        protected_mask: np.ndarray | None = None,
        dx_dc_direct: np.ndarray | None = None,
        ig_baseline="mean",
        ig_steps: int = 32,
        reference: SwapReference | None = None,
        swap: SwapSettings = SwapSettings(),  # noqa: B008 - frozen dataclass, immutable default
        direct_levels: np.ndarray | None = None,
        chunk_size: int = DEFAULT_CHUNK,
        progress: bool = False,
        probe_batches: bool = True,
        fd_step: float = FD_STEP,
        device="cpu",
    ):
        self.device = device
        self.fd_step = fd_step
        self.target_model = target_model
        self.aux_model = aux_model
        self.variant = variant
        self.output = output
        self.ridge = ridge
        self.protected_mask = protected_mask
        self.dx_dc_direct = dx_dc_direct
        self.ig_baseline = ig_baseline
        self.ig_steps = ig_steps
        self.reference = reference
        self.swap = swap
        self.direct_levels = direct_levels
        self.chunk_size = chunk_size
        self.progress = progress
        self.probe_batches = probe_batches

    def score(self, X, c=None) -> np.ndarray:
        """LIC score per individual: ndarray of shape (n,), NaN where undefined (``c``: see :meth:`evaluate`)."""
        return self.evaluate(X, c, evidence=False).scores

    def evaluate(self, X, c=None, *, evidence: bool = True) -> LICResult:
        """Scores, undefined rows, evidence and target probabilities for every row of X.

        Parameters
        ----------
        X : ndarray or Tensor of shape (n, d)
            Encoded features as the target model sees them.
        c : ndarray of shape (n,), optional
            Each individual's protected group index, or its continuous value (variant swap: required, except for a
            continuous c read by an aux-driven move).
        evidence : bool
            Keep the (n, d) per-feature evidence (float32).

        Raises
        ------
        InputError
            Bad variant, shapes, output form, a batch-dependent model (C06), or (swap) a missing
            reference or group vector.
        """
        if self.variant not in VARIANTS:
            raise InputError(f"variant must be one of {list(VARIANTS)}, got {self.variant!r}")
        self.device_used_ = "cpu"                         # variant swap may run elsewhere (_evaluate_swap)
        X = as_tensor(X)
        c, mask, keep, direct_D = self._checked_inputs(X, c)
        output = resolve_output_form(self.target_model, X[: min(len(X), 256)], self.output)
        if self.probe_batches:
            probe_batch_independence(self.target_model, self.aux_model, X, keep)
        twin = float64_copy(self.target_model) if output.form in ("probability", "softmax") else None

        if self.variant == "swap":
            return self._evaluate_swap(X, c, output, keep.numpy(), evidence)
        if is_forward_only(self.target_model):
            if self.variant != "faux":
                raise InputError(f"variant {self.variant!r} needs the target's gradient, but the target is forward-only "
                                 f"({self.target_model.access}); use variant 'swap' (the default) or 'faux' "
                                 "(eq. 9 by finite differences)")
            return self._evaluate_faux_forward(X, output, mask, direct_D, evidence)
        return self._evaluate_gradients(X, output, mask, keep, direct_D, twin, evidence)

    def fit_reference(self, X_ref, c_ref, *, admissible=None, metric: str = "matched", holdout=None,
                      feature_groups=None, guard: float = 0.1, continuous_matching: Literal["rank", "slope"] = "rank",
                      hold_independent: bool = True, hold_jointly: bool = True) -> "FAuxTester":
        """Fit the swap reading's reference (metric and group shifts) on rows in the aux input space; returns self.

        Parameters
        ----------
        X_ref : array of shape (n, d_aux)
            Reference rows as the auxiliary model sees them (e.g. its training rows).
        c_ref : array of shape (n,)
            Their protected attribute (group index or continuous value).
        admissible : bool array of shape (d_aux,), optional
            Features the counterfactual holds fixed (declared).
        metric : {"matched", "covariance", "explained", "between", "within", "diagonal", "euclidean"}
            :func:`faux_checks.method.swap.fit_swap_reference`; ``"matched"`` moves each free numeric feature to
            its own matched value (the one-hot features are the ``swap.categorical_groups``).
        holdout : (X_hold, c_hold), optional
            Rows the aux model did not train on: feature groups that tell it nothing about c there
            (:func:`faux_checks.method.held.uninformative_features`) are held fixed too, always (when
            they and the declared features cover every feature, nothing moves and every score is 0).
        feature_groups : sequence of index arrays, optional
            Groups permuted together for that test (default: one group per feature).
        guard : float
            Scale of the move's guard (:func:`faux_checks.method.counterfactual.fit_floors`); 0 = none.
        hold_independent : bool
            Also hold the feature groups whose distribution does not depend on c
            (:func:`faux_checks.method.held.independent_features`).
        hold_jointly : bool
            Release from those holds the feature groups the held block needs to be jointly free of c
            (:func:`faux_checks.method.joint_hold.jointly_free_hold`); False measures the block without releasing.
        continuous_matching : {"rank", "slope"}
            Continuous c: :func:`faux_checks.method.swap.fit_swap_reference`.

        Attributes set
        --------------
        reference : SwapReference
        held_fixed_ : ndarray of shape (d_aux,), bool
            Features held fixed because they are uninformative about c (not the declared ones).
        informativeness_ : list of dict
            The permutation test per group (empty without ``holdout``).
        joint_hold_ : dict or None
            The joint test of the held block (:func:`faux_checks.method.joint_hold.jointly_free_hold`'s summary).
        reference_sample_ : dict
            The rows read: beyond :data:`~faux_checks.method.reference_rows.REFERENCE_MAX_ROWS` reference (or
            hold-out) rows a seeded sample of them, its size and seed here
            (:func:`~faux_checks.method.reference_rows.capped_reference`). One torch, BLAS and OpenMP thread; the
            hold tests and the joint test's folds side by side on torch's scoring threads (same figures on any count).

        Raises
        ------
        InputError
            See :func:`faux_checks.method.swap.fit_swap_reference`.
        """
        X_ref = as_tensor(X_ref)
        d = X_ref.shape[1]
        declared = np.zeros(d, dtype=bool) if admissible is None else np.asarray(admissible, dtype=bool)
        groups = feature_groups if feature_groups is not None else [[j] for j in range(d)]
        grouped = protected_kind(self.aux_model.kind).grouped
        with one_thread():
            X_ref, c_ref, holdout, self.reference_sample_ = capped_reference(X_ref, c_ref, holdout, grouped=grouped)
            self._fit_holds(X_ref.numpy(), c_ref, declared, groups, holdout, hold_independent, hold_jointly)
            self.reference = self._fitted_reference(X_ref, c_ref, declared | self.held_fixed_, metric, guard,
                                                    continuous_matching)
        return self

    def _fit_holds(self, X_ref: np.ndarray, c_ref, declared: np.ndarray, groups, holdout, hold_independent: bool,
                   hold_jointly: bool) -> None:
        """Set ``held_fixed_``, ``informativeness_``, ``independence_`` and ``joint_hold_``
        (:func:`~faux_checks.method.held.reference_holds`)."""
        holds = reference_holds(self.aux_model.net_, X_ref, c_ref, kind=self.aux_model.kind, declared=declared,
                                groups=groups, holdout=holdout, hold_independent=hold_independent,
                                hold_jointly=hold_jointly)
        self.held_fixed_, self.informativeness_, self.independence_ = holds.held, holds.informativeness, holds.independence
        self.joint_hold_ = holds.joint

    def _fitted_reference(self, X_ref: torch.Tensor, c_ref, held: np.ndarray, metric: str, guard: float,
                          continuous_matching) -> SwapReference:
        """The swap reference with ``held`` fixed: metric, group shifts, matching, level models, guard (:meth:`fit_reference`)."""
        with torch.no_grad():
            raw = self.aux_model.net_(X_ref)
        X = X_ref.numpy()
        matched = None
        if metric == "matched":
            categorical = np.zeros(X.shape[1], dtype=bool)
            for g in self.swap.categorical_groups:
                categorical[np.asarray(g)] = True
            matched = ~held & ~categorical
        reference = with_joint_move(fit_swap_reference(raw, X, c_ref, kind=self.aux_model.kind, admissible=held, metric=metric,
                                    continuous_matching=continuous_matching, matched=matched), self.joint_hold_, X, c_ref)
        if self.swap.categorical == "coupled" or metric == "matched":
            reference = dataclasses.replace(reference, levels=fit_level_models(
                X, c_ref, self.swap.categorical_groups, admissible=reference.admissible,
                kind=self.aux_model.kind, n_groups=max(reference.n_groups, 2)))
        if guard > 0 and metric != "matched":                                  # no aux step to guard
            reference = dataclasses.replace(reference, floors=fit_floors(self.aux_model.net_, X, c_ref,
                                                                         reference, scale=guard))
        return reference

    # ------------------------------------------------------------------ helpers
    def _evaluate_swap(self, X: torch.Tensor, c, output: TargetOutput, keep: np.ndarray, evidence: bool) -> LICResult:
        """Variant swap: chunks through :func:`faux_checks.method.chunk.swap_chunk`."""
        n, d = X.shape
        reference = self.reference
        assert reference is not None, "evaluate() refuses variant 'swap' without a reference"
        parts = []
        bar = _bar(n, self.progress)
        device = torch.device(self.device)
        if device.type != "cpu" and (is_forward_only(self.target_model)
                                     or not isinstance(self.target_model, torch.nn.Module)):
            device = torch.device("cpu")                  # a forward-only target runs where its runtime runs
        self.device_used_ = device.type
        target, aux_net = module_on(self.target_model, device), module_on(self.aux_model.net_, device)
        with one_blas_thread():
            for sl in iter_chunks(n, self.chunk_size):
                _check_finite(X, X[sl])
                x = X[sl] if device.type == "cpu" else X[sl].to(device)
                parts.append(swap_chunk(target, aux_net, x, None if c is None else c[sl],
                                        reference=reference, output=output, settings=self.swap, keep=keep,
                                        direct_levels=self.direct_levels, evidence=evidence))
                if bar is not None:
                    bar.update(sl.stop - sl.start)
        if bar is not None:
            bar.close()
        join = lambda key: np.concatenate([getattr(p, key) for p in parts])   # noqa: E731
        outcomes = weights = None
        if parts[0].outcomes is not None:
            width = max(p.outcomes.shape[1] for p in parts if p.outcomes is not None)
            pad = lambda a: np.pad(a, ((0, 0), (0, width - a.shape[1])))      # noqa: E731
            outcomes = np.concatenate([pad(p.outcomes) for p in parts])
            weights = np.concatenate([pad(p.outcome_weights) for p in parts])
        return LICResult(
            outcomes=outcomes, outcome_weights=weights,
            scores=join("scores"), undefined=join("undefined"),
            evidence=join("evidence").astype(np.float32) if evidence else None, probability=join("probability"),
            direct=join("direct") if parts[0].direct is not None else None,
            counterfactual_probability=join("counterfactual_probability"),
            counterfactual_target=join("counterfactual_target"),
            counterfactual=join("counterfactual") if evidence else None,
        )

    def _evaluate_faux_forward(self, X: torch.Tensor, output: TargetOutput, mask: np.ndarray, direct_D, evidence: bool
                               ) -> LICResult:
        """Eq. 9 for a forward-only target: central finite differences along J⁺ (plus the direct ∂x/∂c), per row.

        Component j = f′(x; uⱼ) with uⱼ = J⁺ⱼ on the aux features and the direct term's ∂x_c/∂c on c's own
        columns (g·J⁺ⱼ + g·D_j for a differentiable target: the derivative along their sum). Evidence: the
        telescoping terms of f(x + h u) − f(x − h u) divided by 2h (:func:`~faux_checks.method.forward.forward_attribution`).
        """
        n, d = X.shape
        keep = ~mask
        prob_fn = lambda p: predict_probability(self.target_model, p, output)        # noqa: E731
        scores = np.empty(n)
        undefined = np.empty(n, dtype=bool)
        flat = np.empty(n, dtype=bool)
        prob = np.empty(n)
        ev = np.zeros((n, d), dtype=np.float32) if evidence else None
        for sl in iter_chunks(n, self.chunk_size):
            x = X[sl]
            _check_finite(X, x)
            J = self.aux_model.jacobian(x[:, torch.from_numpy(keep)], chunk_size=self.chunk_size)   # (b, k, d_aux)
            M, undef = pseudo_inverse_rows(J, ridge=self.ridge)                                    # (b, k, d_aux)
            U = torch.zeros((len(x), M.shape[1], d), dtype=torch.float64)
            U[:, :, torch.from_numpy(keep)] = torch.nan_to_num(M)
            if direct_D is not None:
                U[:, :, torch.from_numpy(mask)] = direct_D[torch.from_numpy(mask)].T[None]
            deriv, no_change, h = directional_change(prob_fn, x, U, step=self.fd_step, chunk_size=self.chunk_size)
            undef = undef.numpy() | ~np.isfinite(deriv).all(axis=1)
            top = np.nan_to_num(np.abs(deriv), nan=-1.0).argmax(axis=1)                     # (b,)
            rows = np.arange(len(x))
            scores[sl] = np.where(undef, np.nan, np.abs(deriv[rows, top]))
            undefined[sl] = undef
            flat[sl] = ~undef & no_change.all(axis=1)
            prob[sl] = prob_fn(x)
            if ev is not None:
                move = torch.as_tensor(h[rows, top])[:, None] * U[rows, torch.as_tensor(top)]   # (b, d)
                terms = forward_attribution(prob_fn, x.double() - move, x.double() + move)
                ev[sl] = np.where(undef[:, None], np.nan, terms / np.where(undef, 1.0, 2 * h[rows, top])[:, None])
        return LICResult(scores=scores, undefined=undefined, evidence=ev, probability=prob,
                         direct=None, no_split_crossed=flat)

    def _checked_inputs(self, X: torch.Tensor, c) -> tuple[Any, np.ndarray, torch.Tensor, torch.Tensor | None]:
        """The inputs :meth:`evaluate` reads, checked (InputError otherwise): rows, finite probe rows, the protected
        mask, the aux model's feature count, (swap) the reference and each row's group, (other variants) the direct
        term of a protected input. Returns ``(c, mask, keep, direct_D)`` for X (n, d): c as given, or (swap, groups)
        int64 (n,); the mask (d,) bool; ``keep`` its complement, a tensor; ∂x/∂c (d, k) float64 or None."""
        n, d = X.shape
        if n == 0:
            raise InputError("no rows to score (0 individuals)")
        _check_finite(X, X[: min(n, 256)])          # the probe rows now; every chunk as it is scored (no (n, d) temporaries)
        mask = np.zeros(d, dtype=bool) if self.protected_mask is None else np.asarray(self.protected_mask, bool)
        if mask.shape != (d,):
            raise InputError(f"protected_mask has shape {mask.shape}, expected ({d},)")
        keep = torch.from_numpy(~mask)
        d_aux = int(keep.sum())
        if self.aux_model.n_features_in_ not in (None, d_aux):
            raise InputError(f"the auxiliary model expects {self.aux_model.n_features_in_} features but X has {d_aux} "
                             f"(after removing {int(mask.sum())} protected columns)")
        if self.variant == "swap":
            if self.reference is None:
                raise InputError("variant 'swap' needs a reference fitted on the aux model's rows "
                                 "(faux_checks.method.swap.fit_swap_reference)")
            if self.reference.metric.shape != (d_aux, d_aux):
                raise InputError(f"the swap reference was fitted on {self.reference.metric.shape[0]} features but the "
                                 f"auxiliary model sees {d_aux}")
            if self.reference.kind != "continuous":
                if c is None or len(c) != n:
                    raise InputError(f"variant 'swap' needs the protected group of each of the {fmt_count(n)} rows")
                c = np.asarray(c, dtype=np.int64)
        direct_D = None
        if mask.any() and self.variant != "swap":
            if self.variant == "ng":
                raise InputError("variant 'ng' cannot add the direct term of a protected input; use 'faux'")
            if self.dx_dc_direct is None:
                raise InputError("protected_mask given without dx_dc_direct")
            direct_D = torch.as_tensor(np.asarray(self.dx_dc_direct, dtype=np.float64))  # (d, k)
        return c, mask, keep, direct_D

    def _evaluate_gradients(self, X: torch.Tensor, output: TargetOutput, mask: np.ndarray, keep: torch.Tensor,
                            direct_D, twin, evidence: bool) -> LICResult:
        """Variants faux, ng, ig and projection chunk by chunk (eq. 9, eq. 10, path-averaged gradients, the projection):
        the target's gradient g and the aux Jacobian J on the aux columns, plus the direct term g·∂x/∂c of a protected
        input. A probability output saturated at exactly 0 or 1 has g = 0 by saturation, not by fairness: undefined."""
        n, d = X.shape
        scores = np.empty(n, dtype=np.float64)
        undefined = np.empty(n, dtype=bool)
        prob = np.empty(n, dtype=np.float64)
        ev = np.empty((n, d), dtype=np.float32) if evidence else None
        direct_out: Any = np.empty(n, dtype=np.float64) if direct_D is not None else None   # filled when direct_D is
        baseline = self._baseline(X)
        bar = _bar(n, self.progress)
        for sl in iter_chunks(n, self.chunk_size):
            x = X[sl]
            _check_finite(X, x)
            p, g = target_probability_and_gradient(self.target_model, x, output, chunk_size=self.chunk_size, _twin=twin)
            if self.variant == "ig":
                g = path_averaged_gradients(
                    self._prob_fn(output, twin), x, n_outputs=1, baseline=baseline, n_steps=self.ig_steps
                )[:, 0]
                J = path_averaged_gradients(
                    self.aux_model.outputs, x[:, keep], n_outputs=self.aux_model.n_jacobian_outputs,
                    baseline=baseline[keep], n_steps=self.ig_steps,
                )
            else:
                J = self.aux_model.jacobian(x[:, keep] if mask.any() else x, chunk_size=self.chunk_size)  # (b, k, d_aux)
            direct = None
            if direct_D is not None:
                direct = g.double() @ direct_D                                           # (b, k)
                direct_out[sl] = direct.abs().amax(dim=1).numpy()
            g_aux = g[:, keep] if mask.any() else g                                      # (b, d_aux)
            if self.variant == "ng":
                res = faux_ng_scores(g_aux, J)
            elif self.variant == "projection":
                res = faux_projection_scores(g_aux, J, direct=direct)
            else:
                res = faux_scores(g_aux, J, ridge=self.ridge, direct=direct, evidence=evidence)
            scores[sl] = res.scores.numpy()
            undefined[sl] = res.undefined.numpy()
            if output.form in ("probability", "softmax"):
                # a probability output that is exactly 0 or 1 even in float64 has g = 0 by
                # saturation, not by fairness: undefined, never a silent "not flagged"
                saturated = ((p <= 0) | (p >= 1)).numpy()
                undefined[sl] |= saturated
                scores[sl][saturated] = np.nan
            prob[sl] = p.numpy()
            if ev is not None:
                ev[sl][:, ~mask] = res.evidence.float().numpy()
                ev[sl][:, mask] = 0.0
            if bar is not None:
                bar.update(sl.stop - sl.start)
        if bar is not None:
            bar.close()
        return LICResult(scores=scores, undefined=undefined, evidence=ev, probability=prob, direct=direct_out)

    def _baseline(self, X: torch.Tensor) -> torch.Tensor:
        if self.variant != "ig":
            return torch.zeros(X.shape[1])
        if isinstance(self.ig_baseline, str):
            if self.ig_baseline == "zeros":
                return torch.zeros(X.shape[1])
            if self.ig_baseline == "mean":
                return X.mean(dim=0)
            raise InputError(f"ig_baseline must be 'mean', 'zeros' or an array of shape (d,), got {self.ig_baseline!r}")
        base = torch.as_tensor(np.asarray(self.ig_baseline, dtype=np.float32))
        if base.shape != (X.shape[1],):
            raise InputError(f"ig_baseline has shape {tuple(base.shape)}, expected ({X.shape[1]},)")
        return base

    def _prob_fn(self, output: TargetOutput, twin):
        model = twin if twin is not None else self.target_model

        def prob(x: torch.Tensor) -> torch.Tensor:
            with eval_mode(model):
                out = raw_output(model, x.double() if twin is not None else x)     # (b, m)
            return probability(out, output)                                        # (b,)

        return prob


def _check_finite(X: torch.Tensor, x: torch.Tensor) -> None:
    """Raise InputError, counting the rows of X with NaN/inf, when the rows x (a slice of X) hold any.

    One float32 sum per chunk instead of an (n, d) boolean temporary: a NaN or inf anywhere makes the sum
    non-finite; a finite chunk whose sum overflows is re-checked element by element.
    """
    if bool(torch.isfinite(x.sum())) or bool(torch.isfinite(x).all()):
        return
    bad = sum(int((~torch.isfinite(X[sl])).any(dim=1).sum()) for sl in iter_chunks(X.shape[0], DEFAULT_CHUNK))
    raise InputError(f"X has {fmt_count(bad)} rows with NaN/inf of {fmt_count(X.shape[0])}; clean them first")


def _bar(n: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=n, desc="fAux scores", unit="row", unit_scale=True, leave=False)
