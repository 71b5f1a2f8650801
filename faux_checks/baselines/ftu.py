"""FTU flip: flip the protected attribute's own input columns and compare predictions.

"Fairness through unawareness" check: when the encoded protected attribute c is one of the
target model's inputs, each individual is scored by how much P(y = target_class | x) changes
when only those columns are set to another group. It sees the direct use of c and nothing
else: proxies of c (docs/method.md, Adult evidence) are invisible to it, which is why fAux exists.
"""

from __future__ import annotations

import numpy as np
import torch

from .._validation import fmt_count
from ..errors import InputError
from ..method._batching import DEFAULT_CHUNK, as_tensor
from ..method.output import TargetOutput, predict_probability, resolve_output_form

__all__ = ["FTUFlipTester"]


class FTUFlipTester:
    """Score = |f(x) − f(x with c's input columns set to another group)|, max over groups.

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
        Takes the encoded features **including** c's columns.
    protected_columns : sequence of int or bool array of shape (d,)
        The encoded features that hold c. One column: a two-level code (see ``levels``);
        two or more: a one-hot group (each row must hold exactly one 1).
    levels : tuple of two floats
        The two values of a single-column code (default ``(0.0, 1.0)``); the flip maps
        ``a ↦ b`` and ``b ↦ a`` (``x ↦ a + b − x``). For a standardised 0/1 column give the
        two standardised values. Ignored for one-hot groups.
    output : TargetOutput
        Output form and tested class of the target.
    chunk_size : int
        Rows per forward pass.

    Notes
    -----
    Fairness through unawareness (Grgić-Hlača et al. 2016; the "FTU" baseline of Castiglione
    et al. 2022). Units: probability (the score lies in [0, 1]). A model that does not read
    c's columns scores exactly 0 (probabilities are computed identically for both inputs). For
    a multi-class one-hot group the score is the largest change over the other groups.
    """

    name = "ftu_flip"
    needs_protected_input = True
    needs_protected_values = False

    def __init__(self, target_model, *, protected_columns, levels: tuple[float, float] = (0.0, 1.0),
                 output: TargetOutput = TargetOutput(), chunk_size: int = DEFAULT_CHUNK):  # noqa: B008 - frozen dataclass, immutable default
        self.target_model = target_model
        self.protected_columns = protected_columns
        self.levels = levels
        self.output = output
        self.chunk_size = chunk_size

    def _columns(self, d: int) -> np.ndarray:
        cols = np.asarray(self.protected_columns)
        if cols.dtype == bool:
            if cols.shape != (d,):
                raise InputError(f"protected_columns is a mask of shape {cols.shape}; expected ({d},)")
            cols = np.flatnonzero(cols)
        cols = cols.astype(np.int64).ravel()
        if len(cols) == 0:
            raise InputError("protected_columns is empty: FTU flip needs c among the target's inputs")
        if cols.min() < 0 or cols.max() >= d or len(np.unique(cols)) != len(cols):
            raise InputError(f"protected_columns {cols.tolist()} must be distinct indices in 0..{d - 1}")
        return cols

    def score(self, X) -> np.ndarray:
        """Return the FTU flip score of each row: ndarray of shape (n,), float64, in [0, 1].

        Parameters
        ----------
        X : ndarray or Tensor of shape (n, d)
            Encoded features, c's columns included.

        Raises
        ------
        InputError
            Bad ``protected_columns``; a single-column code with values other than ``levels``;
            one-hot rows without exactly one 1 (counts in the message).
        """
        X = as_tensor(X)
        n, d = X.shape
        cols = self._columns(d)
        output = resolve_output_form(self.target_model, X[:256], self.output)
        base = predict_probability(self.target_model, X, output, chunk_size=self.chunk_size)   # (n,)
        block = X[:, cols]                                                                       # (n, m)
        if len(cols) == 1:
            a, b = (float(v) for v in self.levels)
            col = block[:, 0]
            ok = torch.isclose(col, torch.tensor(a)) | torch.isclose(col, torch.tensor(b))
            if not bool(ok.all()):
                bad = int((~ok).sum())
                raise InputError(
                    f"protected column {int(cols[0])} has {fmt_count(bad)} of {fmt_count(n)} values that are "
                    f"neither level {a:g} nor {b:g}; pass levels=(…) with the column's two encoded values"
                )
            flipped = X.clone()
            flipped[:, cols[0]] = a + b - col
            return np.abs(base - predict_probability(self.target_model, flipped, output, chunk_size=self.chunk_size))
        ok = ((block == 0) | (block == 1)).all(dim=1) & (block.sum(dim=1) == 1)
        if not bool(ok.all()):
            raise InputError(
                f"{fmt_count(int((~ok).sum()))} of {fmt_count(n)} rows do not hold exactly one 1 in the one-hot "
                f"protected columns {cols.tolist()}; pass the one-hot group of c (or one column with levels=)"
            )
        own = block.argmax(dim=1)                                                                # (n,)
        best = np.zeros(n, dtype=np.float64)
        for group in range(len(cols)):
            rows = own != group
            if not bool(rows.any()):
                continue
            flipped = X.clone()
            flipped[:, cols] = 0.0
            flipped[:, cols[group]] = 1.0
            change = np.abs(base - predict_probability(self.target_model, flipped, output, chunk_size=self.chunk_size))
            best = np.where(rows.numpy(), np.maximum(best, change), best)
        return best
