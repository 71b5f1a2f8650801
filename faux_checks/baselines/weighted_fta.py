"""Weighted FTA: the target's gradient measured in the sensitive-subspace fair metric.

The fair metric of Yurochkin, Bower and Sun (SenSR, ICLR 2020) and Ruoss et al. (LCIFR, NeurIPS
2020) is built from a linear model of the protected attribute c given x: the span S of its
coefficient vectors is the "sensitive subspace", and the metric
d(x, x')² = (x − x')ᵀ (I − P_S) (x − x') makes moves inside S free. Two individuals who differ
only along S are "similar", so an individually fair model must give them the same output.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..errors import InputError
from ..method._batching import DEFAULT_CHUNK, as_tensor
from ..method.gradients import target_probability_and_gradient
from ..method.output import TargetOutput, resolve_output_form
from ..kinds import Kind
from .subspace import fit_sensitive_subspace

__all__ = ["WeightedFTATester"]

class WeightedFTATester:
    """FTA under the sensitive-subspace fair metric: score = ‖P_S ∇ₓ P(y = target_class | x)‖_p.

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
    kind : {"binary", "multiclass", "continuous"}
        Type of c, for the linear model (see :func:`fit_sensitive_subspace`).
    subspace : {"sensitive", "complement"}
        Which projection of the gradient is scored (see Notes). ``"sensitive"`` (default):
        P_S g, the target's sensitivity along the directions that predict c.
        ``"complement"``: (I − P_S) g, the literal "project out the sensitive subspace" reading.
    p : float
        Norm order of the projected gradient (≥ 1; ``float("inf")`` allowed).
    basis : ndarray of shape (d, r), optional
        A given orthonormal basis of S; then :meth:`fit` is not needed.
    output : TargetOutput
    C, alpha : float
        Regularisation of the linear model of c.
    chunk_size : int

    Attributes
    ----------
    basis_ : ndarray of shape (d, r)
        Orthonormal basis of the sensitive subspace S (set by :meth:`fit` or from ``basis``).

    Notes
    -----
    Which projection (our decision, docs/method.md, "Baselines"): the fair metric makes moves along S
    free, so the ε-ball of the metric is a slab that is thin across S's complement and
    unbounded along S. The ε → 0 limit of the largest output change in that neighbourhood,
    with moves along S bounded by a radius r (Ruoss et al. 2020 bound them by an interval), is
    ε‖(I − P_S)g‖ + r‖P_S g‖ → r‖P_S g‖: the individual-fairness violation is the target's
    sensitivity *along* the sensitive subspace, ‖P_S g‖. The complement ‖(I − P_S) g‖ measures
    how steep the model is along fair (allowed) directions: a robustness, not a fairness,
    quantity, which grows with the legitimate use of features. Both are offered; the benchmark
    (docs/benchmark.md) reports both. For binary c, S is one line v̂ and the score is
    |⟨g, v̂⟩|: a global-direction version of fAux's |⟨g, a⟩| / ‖a‖ with a = v (linear aux).
    Unit: probability per unit of the encoded features along a unit vector of S.
    Sources: John et al. 2020 (FTA); Yurochkin et al. 2020; Ruoss et al. 2020.
    """

    name = "weighted_fta"
    needs_protected_input = False
    needs_protected_values = False

    def __init__(self, target_model, *, kind: Kind = "binary", subspace: Literal["sensitive", "complement"] = "sensitive",
                 p: float = 2.0, basis: np.ndarray | None = None, output: TargetOutput = TargetOutput(),  # noqa: B008 - frozen dataclass, immutable default
                 C: float = 1.0, alpha: float = 1.0, chunk_size: int = DEFAULT_CHUNK):
        self.target_model = target_model
        self.kind = kind
        self.subspace = subspace
        self.p = p
        self.basis = basis
        self.output = output
        self.C = C
        self.alpha = alpha
        self.chunk_size = chunk_size

    def fit(self, X, c) -> "WeightedFTATester":
        """Fit the linear model of c given X and keep its sensitive subspace in ``basis_``.

        Parameters
        ----------
        X : ndarray or Tensor of shape (n, d)
        c : array of shape (n,)

        Returns
        -------
        self
        """
        self.basis_ = fit_sensitive_subspace(X, c, kind=self.kind, C=self.C, alpha=self.alpha)
        return self

    def _basis(self, d: int) -> np.ndarray:
        B = getattr(self, "basis_", None)
        if B is None and self.basis is not None:
            B = np.asarray(self.basis, dtype=np.float64)
            if B.ndim == 1:
                B = B[:, None]
            Q, _ = np.linalg.qr(B)
            B = self.basis_ = Q
        if B is None:
            raise InputError(f"{type(self).__name__} has no sensitive subspace; call fit(X, c) or pass basis=")
        if B.shape[0] != d:
            raise InputError(f"the sensitive subspace lives in {B.shape[0]} features but X has {d}")
        return B

    def score(self, X) -> np.ndarray:
        """Return the weighted-FTA score of each row: ndarray of shape (n,), float64.

        Raises
        ------
        InputError
            Not fitted; ``p < 1``; unknown ``subspace``; X's width differs from the subspace's.
        """
        if not self.p >= 1:
            raise InputError(f"weighted FTA needs p >= 1, got {self.p}")
        if self.subspace not in ("sensitive", "complement"):
            raise InputError(f"subspace must be 'sensitive' or 'complement', got {self.subspace!r}")
        X = as_tensor(X)
        B = self._basis(X.shape[1])
        output = resolve_output_form(self.target_model, X[:256], self.output)
        _, g = target_probability_and_gradient(self.target_model, X, output, chunk_size=self.chunk_size)
        g = g.double().numpy()                                            # (n, d)
        along = (g @ B) @ B.T                                             # (n, d): P_S g
        proj = along if self.subspace == "sensitive" else g - along
        return np.linalg.norm(proj, ord=self.p, axis=1)
