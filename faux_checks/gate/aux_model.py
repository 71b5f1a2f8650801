"""The auxiliary model of a check: trained on the audited rows (seeded), or given; and its quality.

fAux estimates ∂x/∂c through the auxiliary model f_aux, so a check is only as good as f_aux: its
quality (held-out ROC-AUC, macro AUC or R²) is measured here with its confidence interval where it
matters (:func:`~faux_checks.gate.bounds.quality_intervals`), for the gate's ``min_aux_quality``
rule (:func:`faux_checks.gate.check_rules.check_rules`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from ..inputs.protected import ProtectedAttribute
from ..kinds import protected_kind
from ..method._batching import as_tensor
from ..method.auxiliary import AuxiliaryModel
from .aux_cache import new_aux, trained_aux
from .bounds import quality_intervals
from .policy_schema import Policy

__all__ = ["AuxFit", "aux_training", "fit_aux", "given_aux", "holdout_scores", "new_aux", "quality_on", "roc_curve",
           "single_holdout", "training_sample"]


class AuxFit(NamedTuple):
    """An auxiliary model ready to differentiate, with its quality, ROC curve (binary c) and the rows it learnt from.

    ``rows`` indexes the audited rows the model was trained on (its training sample, held-out part included; for a
    given model the same seeded sample): the swap reading's reference rows; ``holdout`` the rows it did not train
    on (for a given model, those a trained one would have held out), where the swap reading tests which features
    inform it about c.
    ``intervals``: :func:`~faux_checks.gate.bounds.quality_intervals` on those held-out rows.
    ``reused``: the model is a copy of one this process trained on the same inputs (:mod:`.aux_cache`).
    ``cross``: the :class:`~faux_checks.gate.crossfit.CrossFit` of a cross-fitted check (None for the single split);
    then quality, intervals and ROC read every audited row out of fold, ``model``/``rows``/``holdout`` are fold 0's,
    and ``fold_quality`` lists each fold model's quality on its own fold.
    """

    model: AuxiliaryModel
    quality: float
    metric: str
    roc: dict[str, list[float]]
    rows: np.ndarray
    holdout: np.ndarray
    intervals: list | tuple = ()
    reused: bool = False
    cross: Any = None
    fold_quality: tuple = ()


def given_aux(aux_model, policy: Policy, protected: ProtectedAttribute, n_features: int) -> AuxiliaryModel:
    """A given auxiliary model (an :class:`AuxiliaryModel`, or a torch module of raw outputs) as an AuxiliaryModel."""
    if isinstance(aux_model, AuxiliaryModel):
        return aux_model
    return AuxiliaryModel.from_module(aux_model, kind=protected.kind, output_space=policy.aux.output_space,
                                      groups=protected.groups, n_features=n_features)


def fit_aux(X_aux: np.ndarray, protected: ProtectedAttribute, values: np.ndarray, policy: Policy, *,
            aux_model=None, progress: bool = False) -> AuxFit:
    """Train the auxiliary model on the audited rows, or take the given one and measure it on them.

    Parameters
    ----------
    X_aux : ndarray of shape (n, d_aux)
        Encoded features of the audited rows, without the protected attribute's own columns.
    protected : ProtectedAttribute
    values : ndarray of shape (n,)
        Encoded protected values of the audited rows.
    aux_model : AuxiliaryModel or torch module, optional
        Given auxiliary model; its quality is measured on the audited rows a trained one would have held out
        (:func:`gate_split`), and the swap reference is fitted on the others.

    Notes
    -----
    Trained on at most ``policy.aux.max_train_rows`` audited rows, a sample seeded with
    ``policy.seed + 1`` (the audit sample used ``policy.seed``); quality on its held-out rows.
    """
    confidence = policy.decision.confidence
    train = training_sample(len(X_aux), policy)
    if aux_model is not None:
        # the rows the gate's own aux model would have trained on and held out (the same seeded split), so that a
        # gate's recorded aux model given back reproduces the gate's reference, holds and score
        _, hold = gate_split(len(train), values[train], policy, protected.kind)
        rows, holdout = train, train[hold]
        aux = given_aux(aux_model, policy, protected, X_aux.shape[1])
        score = holdout_scores(aux, X_aux[holdout])
        quality, metric, roc = quality_on(aux, X_aux[holdout], values[holdout], protected, score=score)
        intervals = quality_intervals(protected.kind, values[holdout], score,
                                      protected.groups, confidence, seed=policy.seed)
        return AuxFit(aux, quality, metric.replace("the audit rows", "the audit rows it would have held out"), roc,
                      rows, holdout, intervals)
    aux, reused = trained_aux(policy, protected.kind, X_aux[train], values[train], groups=protected.groups,
                              progress=progress)        # trained once per process on the same inputs
    y, score = aux.holdout_
    return AuxFit(aux, aux.quality_, aux.quality_metric_, roc_curve(y, score, aux.kind), train,
                  train[aux.holdout_rows_], quality_intervals(aux.kind, y, score, protected.groups, confidence,
                                                              seed=policy.seed), reused)


def training_sample(n: int, policy: Policy) -> np.ndarray:
    """The audited rows (sorted positions of n) the auxiliary model trains on: all, or at most ``[aux]
    max_train_rows`` drawn with ``policy.seed + 1`` (the audit sample used ``policy.seed``)."""
    if n <= policy.aux.max_train_rows:
        return np.arange(n)
    return np.sort(np.random.default_rng(policy.seed + 1).choice(n, policy.aux.max_train_rows, replace=False))


def single_holdout(values: np.ndarray, policy: Policy, kind: str) -> np.ndarray:
    """The audited rows (positions) the single split holds out: :func:`gate_split` of :func:`training_sample`."""
    train = training_sample(len(values), policy)
    _, hold = gate_split(len(train), np.asarray(values)[train], policy, kind)
    return train[hold]


def gate_split(n: int, values: np.ndarray, policy: Policy, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The training and held-out positions (of n rows) that :meth:`AuxiliaryModel.fit` draws with ``policy.seed``."""
    from ..method.auxiliary import holdout_split

    strata = np.asarray(values).astype(np.int64) if protected_kind(kind).grouped else None
    return holdout_split(n, policy.aux.holdout, np.random.default_rng(policy.seed), strata=strata)


def holdout_scores(aux: AuxiliaryModel, X_aux: np.ndarray) -> np.ndarray:
    """A given aux model's scores as its quality reads them: P(group 1) (m,), group probabilities (m, k) or the prediction."""
    with torch.no_grad():
        raw = aux.net_(as_tensor(X_aux))
    raw = raw[:, None] if raw.ndim == 1 else raw
    if aux.kind == "binary":
        return torch.sigmoid(raw[:, 0]).double().numpy()
    if aux.kind == "multiclass":
        return torch.softmax(raw.double(), dim=1).numpy()
    return raw[:, 0].double().numpy()


def quality_on(aux: AuxiliaryModel, X_aux: np.ndarray, values: np.ndarray, protected: ProtectedAttribute,
               score: np.ndarray | None = None):
    """Quality of a given aux model on rows it did not train on: (quality, metric, ROC curve).

    ``score``: the aux model's :func:`holdout_scores` on ``X_aux`` ((n,) or (n, m)) where the caller already has
    them (one forward of the rows instead of two); None computes them.
    """
    from sklearn.metrics import r2_score, roc_auc_score

    score = holdout_scores(aux, X_aux) if score is None else score
    if protected.kind == "binary":
        return float(roc_auc_score(values, score)), "roc_auc (given aux model, on the audit rows)", roc_curve(values, score, "binary")
    if protected.kind == "multiclass":
        return (float(roc_auc_score(values, score, multi_class="ovr", average="macro")),
                "roc_auc_ovr_macro (given aux model, on the audit rows)", {})
    return float(r2_score(values, score)), "r2 (given aux model, on the audit rows)", {}


def free_column_quality(aux: AuxiliaryModel, X_aux: np.ndarray, values: np.ndarray, protected: ProtectedAttribute,
                        held: np.ndarray, *, seed: int = 0) -> float:
    """The aux model's quality when the columns the move holds carry no information: they are permuted together.

    Parameters
    ----------
    aux : AuxiliaryModel
    X_aux : ndarray of shape (n, d_aux)
        Rows it did not train on.
    values : ndarray of shape (n,)
        Their protected values.
    protected : ProtectedAttribute
    held : bool array of shape (d_aux,)
        Features the move holds fixed (declared admissible, uninformative, independent of c).
    seed : int

    Returns
    -------
    float
        ROC-AUC / macro AUC / R² as :func:`quality_on`; what the free columns tell the aux model about c (a lower
        bound: the model was trained with the held columns available). NaN when fewer than 2 rows.

    Notes
    -----
    Our reading: reported next to the aux model's own quality, so that a reader sees how
    much of c the columns that move carry.
    """
    X = np.asarray(X_aux, dtype=np.float32).copy()
    if len(X) < 2:
        return float("nan")
    held = np.asarray(held, dtype=bool)
    if held.any():
        X[:, held] = X[np.random.default_rng(seed).permutation(len(X))][:, held]
    try:
        return quality_on(aux, X, values, protected)[0]
    except ValueError:
        return float("nan")


def roc_curve(y, score, kind) -> dict[str, list[float]]:
    """ROC curve of a binary aux model (at most 200 points; empty for other kinds or one class)."""
    if kind != "binary" or len(y) == 0 or len(np.unique(y)) < 2:
        return {}
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(y, score)
    keep = np.unique(np.linspace(0, len(fpr) - 1, min(len(fpr), 200)).astype(int))
    return {"fpr": fpr[keep].tolist(), "tpr": tpr[keep].tolist()}


def aux_training(aux: AuxiliaryModel) -> dict[str, Any]:
    """Everything that determines a trained auxiliary model besides the data: its settings as used."""
    return {
        "kind": aux.kind, "hidden": list(aux.hidden), "epochs": aux.epochs, "epochs_run": getattr(aux, "epochs_run_", None),
        "lr": aux.lr, "batch_size": aux.batch_size, "batch_size_used": getattr(aux, "batch_size_", None),
        "weight_decay": aux.weight_decay, "holdout": aux.holdout, "patience": aux.patience,
        "output_space": aux.output_space, "seed": aux.seed, "n_train": getattr(aux, "n_train_", None),
        "n_holdout": getattr(aux, "n_holdout_", None), "optimizer": "Adam", "dtype": "float32",
    }
