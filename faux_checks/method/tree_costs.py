"""Predictions of a fitted gradient-boosting model on fixed rows with some columns replaced, recomputing only the
trees that read them.

The joint test of the held block (:mod:`faux_checks.method.joint_hold`) ranks every held group by what permuting it
costs the block's classifier: one prediction of every fold's rows per group. A tree that never splits on the permuted
columns predicts what it predicted on the unpermuted rows, so :class:`ForestRows` keeps each tree's output on the rows
and the running sums of scikit-learn's ``HistGradientBoosting*._raw_predict`` (the baseline, then each iteration's
tree added in order), and for a permutation recomputes only the trees that split on the permuted columns, from the
first of them on, in the same order: the predictions are scikit-learn's, bit for bit
(tests/method/test_tree_costs.py), for a fraction of the trees.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ForestRows", "forest_rows"]


class ForestRows:
    """One fitted ``HistGradientBoostingClassifier`` / ``Regressor`` (numeric features) on fixed rows.

    Parameters
    ----------
    model : fitted HistGradientBoostingClassifier or HistGradientBoostingRegressor
        Without categorical features (its splits compare a column with a threshold).
    X : ndarray of shape (n, k), float64
        The rows (the model's k input columns).

    Notes
    -----
    Reads scikit-learn's fitted trees (``_predictors``, ``_baseline_prediction``, ``_bin_mapper``, ``_loss``): private
    attributes of scikit-learn 1.x; :func:`forest_rows` returns None where they are missing.
    """

    def __init__(self, model, X: np.ndarray) -> None:
        self.model = model
        self.known, self.f_idx = model._bin_mapper.make_known_categories_bitsets()
        self.trees = model._predictors                                        # [iteration][k] TreePredictor
        baseline = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
        n, n_iter, n_k = len(X), len(self.trees), len(baseline)
        self.baseline = baseline
        self.reads = [[frozenset(np.unique(t.nodes["feature_idx"][t.nodes["is_leaf"] == 0]).tolist()) for t in it]
                      for it in self.trees]
        self.outputs = np.empty((n_iter, n_k, n))
        self.sums = np.empty((n_iter, n_k, n))                                # after iteration i, as _raw_predict adds
        for k in range(n_k):
            running = np.zeros(n) + baseline[k]
            for i, it in enumerate(self.trees):
                self.outputs[i, k] = self._tree(it[k], X)
                running += self.outputs[i, k]
                self.sums[i, k] = running

    def _tree(self, predictor, X: np.ndarray) -> np.ndarray:
        return predictor.predict(X, self.known, self.f_idx, 1)

    def raw(self, X: np.ndarray, columns) -> np.ndarray:
        """(n, K) raw predictions on ``X``, the fixed rows with only ``columns`` (model input positions) changed."""
        cols = frozenset(int(j) for j in columns)
        n_iter, n_k, n = self.outputs.shape
        out = np.zeros((n, n_k), order="F")
        for k in range(n_k):
            first = next((i for i in range(n_iter) if self.reads[i][k] & cols), None)
            if first is None:
                out[:, k] = self.sums[-1, k] if n_iter else self.baseline[k]
                continue
            running = self.sums[first - 1, k].copy() if first else np.zeros(n) + self.baseline[k]
            for i in range(first, n_iter):
                running += self._tree(self.trees[i][k], X) if self.reads[i][k] & cols else self.outputs[i, k]
            out[:, k] = running
        return out

    def predict(self, X: np.ndarray, columns, kind: str, m: int) -> np.ndarray:
        """What ``joint_hold``'s prediction gives on ``X`` (only ``columns`` changed): (n,) for continuous c, else
        (n, m) probabilities with the model's classes in their columns."""
        raw = self.raw(X, columns)
        if kind == "continuous":
            return np.asarray(self.model._loss.link.inverse(raw.ravel()))
        out = np.zeros((len(X), m))
        out[:, self.model.classes_] = self.model._loss.predict_proba(raw)
        return out


def forest_rows(model, X: np.ndarray) -> ForestRows | None:
    """:class:`ForestRows` of ``model`` on ``X``; None for a model without scikit-learn's gradient-boosting trees or
    with a categorical split (the caller predicts whole)."""
    try:
        if getattr(model, "is_categorical_", None) is not None and np.any(model.is_categorical_):
            return None
        return ForestRows(model, np.ascontiguousarray(X, dtype=np.float64))
    except (AttributeError, TypeError, KeyError, ValueError):
        return None
