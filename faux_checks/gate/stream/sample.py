"""The sample pass: row counts, protected levels and the auxiliary model's bottom-k training sample.

The sample is the ``k`` audited rows with the smallest seeded hash key of their row number
(:func:`row_keys`), so it does not depend on the chunk size or on how the file is sharded, and
parts merge exactly (:func:`merge_samples`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from ...errors import InputError

__all__ = ["count_protected", "MAX_LEVELS", "merge_samples", "row_keys", "SamplePart"]

#: Distinct protected values tracked exactly; beyond this the attribute must be continuous.
MAX_LEVELS = 1_000
_U64 = np.uint64


def row_keys(rows: np.ndarray, seed: int) -> np.ndarray:
    """Seeded hash key of each input-row number: the SplitMix64 finaliser of ``row + seed·φ``.

    A bijection of uint64, so distinct rows get distinct keys (no ties); the rows with the k
    smallest keys are a uniform sample of k rows without replacement, the same for any chunking.

    Parameters
    ----------
    rows : int array of shape (m,)
    seed : int

    Returns
    -------
    ndarray of shape (m,), uint64
    """
    with np.errstate(over="ignore"):
        z = np.asarray(rows, dtype=np.int64).astype(_U64)
        z = z + _U64((int(seed) * 0x9E3779B97F4A7C15 + 0x9E3779B97F4A7C15) % 2**64)
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        return z ^ (z >> _U64(31))


@dataclass
class SamplePart:
    """Result of the sample pass over some rows; parts merge exactly (:func:`merge_samples`).

    Attributes
    ----------
    k : int
        Sample size asked for (``policy.aux.max_train_rows``).
    n_rows, n_missing : int
        Rows read; rows with a missing protected value.
    level_counts : dict or None
        Protected value -> row count; None once more than ``MAX_LEVELS`` distinct values were seen.
    level_examples : tuple
        Up to ``MAX_LEVELS + 1`` distinct protected values (kind inference when counts overflow).
    keys : ndarray of shape (m,), uint64
    rows : ndarray of shape (m,), int64
        Input-row numbers of the sampled rows (m ≤ k).
    X : ndarray of shape (m, d), float32
        Their encoded features.
    protected : ndarray of shape (m,), object
        Their raw protected values.
    """

    k: int
    n_rows: int = 0
    n_missing: int = 0
    level_counts: dict | None = field(default_factory=dict)
    level_examples: tuple = ()
    keys: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=_U64))
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    X: np.ndarray | None = None
    protected: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=object))

    def _add_levels(self, counts: dict) -> None:
        if self.level_counts is not None:
            for value, c in counts.items():
                self.level_counts[value] = self.level_counts.get(value, 0) + int(c)
            if len(self.level_counts) > MAX_LEVELS:
                self.level_examples = tuple(list(self.level_counts)[: MAX_LEVELS + 1])
                self.level_counts = None
        elif len(self.level_examples) <= MAX_LEVELS:
            seen = dict.fromkeys(self.level_examples)
            seen.update(dict.fromkeys(counts))
            self.level_examples = tuple(list(seen)[: MAX_LEVELS + 1])

    def _add_rows(self, keys, rows, X=None, protected=None) -> None:
        """Add rows (with their features, or keys only: :func:`~.passes.key_pass`) and keep the bottom-k."""
        keys = np.concatenate([self.keys, keys])
        rows = np.concatenate([self.rows, rows])
        if X is not None:
            X = np.concatenate([self.X, X]) if self.X is not None else X
            protected = np.concatenate([self.protected, protected])
        if len(keys) > self.k:
            keep = np.argpartition(keys, self.k - 1)[: self.k]
            keys, rows = keys[keep], rows[keep]
            if X is not None:
                X, protected = X[keep], protected[keep]
        self.keys, self.rows = keys, rows
        if X is not None:
            self.X, self.protected = X, protected

    @property
    def threshold(self) -> int | None:
        """Largest kept key once the sample is full (rows with a larger key cannot enter)."""
        return int(self.keys.max()) if len(self.keys) >= self.k else None

    def sorted(self) -> "SamplePart":
        """The same sample with its rows in input order (the training order)."""
        order = np.argsort(self.rows, kind="stable")
        X, protected = (self.X[order], self.protected[order]) if self.X is not None else (None, self.protected)
        return SamplePart(self.k, self.n_rows, self.n_missing, self.level_counts, self.level_examples,
                          self.keys[order], self.rows[order], X, protected)


def count_protected(part: SamplePart, prot: pd.Series) -> np.ndarray:
    """Add a chunk's rows, missing values and levels to ``part``; return the missing mask (m,)."""
    if isinstance(prot.dtype, pd.CategoricalDtype):
        prot = prot.astype(object)
    missing = prot.isna().to_numpy()
    part.n_rows += len(prot)
    part.n_missing += int(missing.sum())
    if part.level_counts is not None or len(part.level_examples) <= MAX_LEVELS:
        part._add_levels(prot.value_counts(dropna=True, sort=False).to_dict())
    return missing


def merge_samples(parts: Sequence[SamplePart]) -> SamplePart:
    """Exact merge of sample parts over disjoint rows: counts add, the bottom-k of the union is kept.

    Returns
    -------
    SamplePart
        In input order; equal to :func:`~.passes.sample_pass` over all the parts' rows at once.
    """
    if not parts:
        raise InputError("no sample parts to merge (no shards)")
    out = SamplePart(k=parts[0].k)
    for p in parts:
        out.n_rows += p.n_rows
        out.n_missing += p.n_missing
        if p.level_counts is None:  # too many distinct values: keep examples only
            examples = [*(out.level_counts or {}), *out.level_examples, *p.level_examples]
            out.level_counts, out.level_examples = None, tuple(dict.fromkeys(examples))[: MAX_LEVELS + 1]
        else:
            out._add_levels(p.level_counts)
        if len(p.keys):
            out._add_rows(p.keys, p.rows, p.X, p.protected if p.X is not None else None)
    return out.sorted()
