"""Unfair Map: a gradient-flow attack inside the fair-metric neighbourhood (Maity et al. 2021).

Each individual x₀ is moved by gradient ascent on its penalised loss
ℓ(f(x), y) − λ d(x, x₀)², where d is the sensitive-subspace fair metric (moves along the
sensitive subspace S are free, moves across it cost λ per squared unit). A fair model's loss
barely grows under such moves; the score is the loss ratio ℓ(after) / ℓ(before).
"""

from __future__ import annotations


import numpy as np
import torch

from .._validation import fmt_count
from ..errors import InputError
from ..kinds import Kind
from ..method._batching import DEFAULT_CHUNK, as_tensor, eval_mode, iter_chunks
from ..method.output import TargetOutput, log_odds, predict_probability, raw_output, resolve_output_form
from .subspace import fit_sensitive_subspace

__all__ = ["UnfairMapTester"]

#: Loss floor (nats) of the denominator, so a perfectly confident start gives a finite ratio.
MIN_LOSS = 1e-12


def _log_odds(model, x: torch.Tensor, output: TargetOutput) -> torch.Tensor:
    """Differentiable log-odds of the tested class, (b, d) -> (b,).

    Probability forms are clamped to [1e-7, 1 − 1e-7] (a finite loss at a saturated start);
    class scores go through log-softmax.
    """
    out = raw_output(model, x)                                            # (b, m)
    form, cls = output.form, output.target_class
    if form == "logit":
        return log_odds(out, output)
    if form == "probability":
        p = out[:, 0].clamp(1e-7, 1 - 1e-7)
        z = torch.log(p) - torch.log1p(-p)
        return z if cls == 1 else -z
    if form == "softmax":
        logp = torch.log(out.clamp_min(1e-12))
    else:
        logp = torch.log_softmax(out, dim=1)
    others = torch.cat([logp[:, :cls], logp[:, cls + 1:]], dim=1)
    return logp[:, cls] - torch.logsumexp(others, dim=1)


def gradient_flow_loss_ratio(model, X: torch.Tensor, y: torch.Tensor, basis: torch.Tensor, output: TargetOutput, *,
                             steps: int, step_size: float, penalty: float) -> torch.Tensor:
    """Loss ratio after the fair-metric gradient flow, for one batch (no loop over rows).

    Parameters
    ----------
    X : Tensor of shape (b, d), float32
    y : Tensor of shape (b,), float32 in {0, 1}
        Label of the tested class per row.
    basis : Tensor of shape (d, r), float32
        Orthonormal basis of the sensitive subspace S.

    Returns
    -------
    Tensor of shape (b,), float64
        ℓ(x*) / max(ℓ(x₀), MIN_LOSS) with x* the iterate (start included) of largest penalised
        objective; ≥ 1 up to the loss floor (see :class:`UnfairMapTester` Notes).
    """
    x0 = X.float()
    x = x0.clone()
    best_obj = best_loss = loss0 = None
    for t in range(steps + 1):
        x.requires_grad_(True)
        z = _log_odds(model, x, output)                                    # (b,)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y, reduction="none")  # (b,)
        diff = x - x0                                                      # (b, d)
        along = diff @ basis                                               # (b, r)
        dist2 = (diff * diff).sum(1) - (along * along).sum(1)             # (b,): ‖(I − P_S) diff‖²
        obj = loss - penalty * dist2                                       # (b,)
        if t < steps:
            (grad,) = torch.autograd.grad(obj.sum(), x)                    # (b, d): rows independent
        obj, loss = obj.detach().double(), loss.detach().double()
        if t == 0:
            best_obj, best_loss, loss0 = obj, loss, loss
        else:
            better = obj > best_obj
            best_obj = torch.where(better, obj, best_obj)
            best_loss = torch.where(better, loss, best_loss)
        if t < steps:
            x = (x + step_size * grad).detach()
    assert loss0 is not None                        # set at t = 0 (the loop runs steps + 1 >= 1 times)
    return best_loss / loss0.clamp_min(MIN_LOSS)


class UnfairMapTester:
    """Per-individual loss ratio of the Unfair Map attack (Maity et al. 2021).

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
    kind : {"binary", "multiclass", "continuous"}
        Type of c, for the linear model that defines the sensitive subspace.
    steps : int
        Gradient-ascent steps of the flow (≥ 1).
    step_size : float
        Step η, in encoded-feature units per unit of gradient (> 0).
    penalty : float
        λ ≥ 0 of the fair-metric penalty λ‖(I − P_S)(x − x₀)‖² (nats per squared feature unit).
    basis : ndarray of shape (d, r), optional
        A given orthonormal basis of S; then :meth:`fit` is not needed.
    output : TargetOutput
    C, alpha : float
        Regularisation of the linear model of c (see
        :func:`faux_checks.baselines.subspace.fit_sensitive_subspace`).
    chunk_size : int
        Rows attacked together (the flow is batched: one backward pass per step per chunk).

    Attributes
    ----------
    basis_ : ndarray of shape (d, r)

    Notes
    -----
    Maity, Xue, Yurochkin, Sun, "Statistical inference for individual fairness", ICLR 2021:
    the gradient flow ẋ = ∇ₓ{ℓ(f(x), y) − λ d_x(x, x₀)²} with the sensitive-subspace metric,
    discretised as ``steps`` Euler steps of size η; their test statistic is the mean of the
    per-individual loss ratio ℓ(f(x*), y) / ℓ(f(x₀), y), which we report per individual.

    Our choices: ℓ is the cross-entropy of the tested class; without labels, y is the model's
    own decision 1[P > 0.5] (the attack then tries to reverse it); x* is the iterate of
    largest penalised objective (start included), which guarantees ℓ(x*) ≥ obj(x*) ≥ obj(x₀) =
    ℓ(x₀), i.e. ratio ≥ 1, even when a step overshoots; defaults (20 steps, η = 0.1, λ = 1)
    are ours (the paper's are tuned per data set). Unit: dimensionless ratio ≥ 1.
    """

    name = "unfair_map"
    needs_protected_input = False
    needs_protected_values = False

    def __init__(self, target_model, *, kind: Kind = "binary", steps: int = 20, step_size: float = 0.1,
                 penalty: float = 1.0, basis: np.ndarray | None = None, output: TargetOutput = TargetOutput(),  # noqa: B008 - frozen dataclass, immutable default
                 C: float = 1.0, alpha: float = 1.0, chunk_size: int = DEFAULT_CHUNK):
        self.target_model = target_model
        self.kind = kind
        self.steps = steps
        self.step_size = step_size
        self.penalty = penalty
        self.basis = basis
        self.output = output
        self.C = C
        self.alpha = alpha
        self.chunk_size = chunk_size

    def fit(self, X, c) -> "UnfairMapTester":
        """Fit the sensitive subspace from a linear model of c given X; returns self."""
        self.basis_ = fit_sensitive_subspace(X, c, kind=self.kind, C=self.C, alpha=self.alpha)
        return self

    def score(self, X, y=None) -> np.ndarray:
        """Return the loss ratio of each row after the attack: ndarray of shape (n,), float64, ≥ 1.

        Parameters
        ----------
        X : ndarray or Tensor of shape (n, d)
        y : array of shape (n,), optional
            True labels of the tested class (0/1). Default: the model's decision 1[P > 0.5].

        Raises
        ------
        InputError
            Not fitted; bad steps / step size / penalty; labels of the wrong length or not 0/1.
        """
        if int(self.steps) != self.steps or self.steps < 1:
            raise InputError(f"steps must be an integer >= 1, got {self.steps}")
        if not self.step_size > 0:
            raise InputError(f"step_size must be > 0, got {self.step_size}")
        if not self.penalty >= 0:
            raise InputError(f"penalty must be >= 0, got {self.penalty}")
        X = as_tensor(X)
        n, d = X.shape
        B = getattr(self, "basis_", None)
        if B is None and self.basis is not None:
            B = np.linalg.qr(np.atleast_2d(np.asarray(self.basis, dtype=np.float64).T).T)[0]
            self.basis_ = B
        if B is None:
            raise InputError("UnfairMapTester has no sensitive subspace; call fit(X, c) or pass basis=")
        if B.shape[0] != d:
            raise InputError(f"the sensitive subspace lives in {B.shape[0]} features but X has {d}")
        basis = torch.as_tensor(B, dtype=torch.float32)
        output = resolve_output_form(self.target_model, X[:256], self.output)
        if y is None:
            labels = torch.as_tensor(predict_probability(self.target_model, X, output, chunk_size=self.chunk_size) > 0.5)
        else:
            y = np.asarray(y)
            if len(y) != n:
                raise InputError(f"X has {fmt_count(n)} rows but y has {fmt_count(len(y))}")
            if not np.isin(y, (0, 1)).all():
                raise InputError("y must hold 0/1 labels of the tested class")
            labels = torch.as_tensor(y)
        labels = labels.float()
        out = np.empty(n, dtype=np.float64)
        model = self.target_model
        with eval_mode(model):
            params = [p for p in model.parameters()] if hasattr(model, "parameters") else []
            flags = [p.requires_grad for p in params]
            try:
                for p in params:
                    p.requires_grad_(False)                                # gradients w.r.t. x only
                for sl in iter_chunks(n, self.chunk_size):
                    out[sl] = gradient_flow_loss_ratio(model, X[sl], labels[sl], basis, output, steps=int(self.steps),
                                                       step_size=self.step_size, penalty=self.penalty).numpy()
            finally:
                for p, flag in zip(params, flags, strict=True):
                    p.requires_grad_(flag)
        return out
