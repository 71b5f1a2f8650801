"""FTA (local): the ℓp norm of the target's input gradient (John et al. 2020, ε → 0 limit)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..method._batching import DEFAULT_CHUNK, as_tensor
from ..method.gradients import target_probability_and_gradient
from ..method.output import TargetOutput, resolve_output_form

__all__ = ["FTATester"]


class FTATester:
    """Fairness-through-awareness gradient tester: score = ‖∇ₓ P(y = target_class | x)‖_p.

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
    output : TargetOutput
    p : float
        Norm order (≥ 1; ``float("inf")`` allowed).
    chunk_size : int

    Notes
    -----
    Local limit of the ε-neighbourhood search of John, Vijaykeerthy and Saha, "Verifying
    individual fairness in machine learning models", UAI 2020. It ignores c: a model steep in
    any direction is flagged (the weakness fAux addresses, Castiglione et al. 2022 §2).
    Unit: probability per unit of the encoded features.
    """

    name = "fta"
    needs_protected_input = False

    def __init__(self, target_model, *, output: TargetOutput = TargetOutput(), p: float = 2.0,  # noqa: B008 - frozen dataclass, immutable default
                 chunk_size: int = DEFAULT_CHUNK):
        self.target_model = target_model
        self.output = output
        self.p = p
        self.chunk_size = chunk_size

    def score(self, X) -> np.ndarray:
        """Return the FTA score of each row: ndarray of shape (n,), float64.

        Raises
        ------
        InputError
            If ``p < 1`` or the output form does not fit the model.
        """
        if not self.p >= 1:
            raise InputError(f"FTA needs p >= 1, got {self.p}")
        X = as_tensor(X)
        output = resolve_output_form(self.target_model, X[:256], self.output)
        _, g = target_probability_and_gradient(self.target_model, X, output, chunk_size=self.chunk_size)
        return g.double().norm(p=self.p, dim=1).numpy()
