"""The protected attribute as per-row group probabilities: validation, draws and how sharp they are.

When c is not recorded, fair-lending reviews estimate it per person from surname and geography as probabilities
(BISG: Elliott et al. 2009, "Using the Census Bureau's surname list to improve estimates of race/ethnicity and
associated disparities"). :func:`probability_matrix` reads the policy's probability columns and refuses, naming
every offending column with its row count and the fix, anything that is not a probability vector per row (never
renormalised silently); :func:`draw_groups` draws c per row from them (one completed data set of a multiple
imputation, Rubin 1987); :func:`expected_auc` says how sharp they are: the ROC-AUC the probabilities would reach
against c drawn from them, computed from the probabilities alone.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import ConfigurationError

__all__ = ["SUM_TOLERANCE", "check_probabilities_not_input", "discrimination", "draw_groups", "expected_auc",
           "expected_auc_binary", "probability_matrix"]

#: Largest |sum − 1| of a row's probabilities that is read as 1 (rounding of a file written with 7+ digits).
SUM_TOLERANCE = 1e-6


def _problems(frame: pd.DataFrame, groups: Mapping[str, str]) -> list[str]:
    """Every column-level problem of the probability columns: non-numeric, missing values, out of [0, 1]."""
    problems = []
    for group, column in groups.items():
        values = pd.to_numeric(frame[column], errors="coerce")
        text = int((values.isna() & frame[column].notna()).sum())
        missing = int(frame[column].isna().sum())
        outside = int(((values < 0) | (values > 1)).sum())
        for count, what in ((text, "not a number"), (missing, "missing"), (outside, "outside [0, 1]")):
            if count:
                problems.append(f"'{column}' ({group}): {fmt_count(count)} rows {what}")
    return problems


def probability_matrix(frame: pd.DataFrame, groups: Mapping[str, str], *, column: str,
                       data_name: str = "the audit data") -> np.ndarray:
    """The per-row group probabilities of the policy's ``[protected_probabilities] groups``, checked.

    Parameters
    ----------
    frame : DataFrame of shape (n, any)
        The audit rows; never modified.
    groups : mapping of str to str
        Group name -> its probability column (at least two groups).
    column : str
        The protected attribute's name; the audit data must not hold a column of that name.
    data_name : str
        How messages name the data.

    Returns
    -------
    ndarray of shape (n, n_groups), float64
        Row i, column g: P(c_i = group g), in ``groups`` order; each row sums to 1 within :data:`SUM_TOLERANCE`.

    Raises
    ------
    ConfigurationError
        The data holds ``column`` itself (two sources of c); probability columns missing; values not numbers,
        missing or outside [0, 1]; rows whose probabilities do not sum to 1. Every offending column is named with
        its row count, and the fix.
    """
    if column in frame.columns:
        raise ConfigurationError(f"{data_name} holds a '{column}' column and the policy gives '{column}' as "
                                 "probabilities ([protected_probabilities]); keep one: drop the column to check on the "
                                 "estimated probabilities, or remove [protected_probabilities] to check on the "
                                 "recorded values; nothing was written")
    absent = [f"'{c}' ({g})" for g, c in groups.items() if c not in frame.columns]
    if absent:
        raise ConfigurationError(f"[protected_probabilities] names {len(absent)} probability column(s) missing from "
                                 f"{data_name} ({fmt_count(len(frame))} rows): {', '.join(absent)}; add them or fix "
                                 "groups = {{ group = \"COLUMN\", ... }} in the policy; nothing was written")
    problems = _problems(frame, groups)
    if problems:
        raise ConfigurationError(f"the probabilities of '{column}' in {data_name} are not all probabilities: "
                                 f"{'; '.join(problems)}; give every row a value in [0, 1] for every group (a row "
                                 "whose estimate is missing cannot be imputed: drop it or give it the population "
                                 "shares); nothing was written")
    matrix = frame[list(groups.values())].to_numpy(dtype=np.float64)
    gap = np.abs(matrix.sum(axis=1) - 1.0)
    off = gap > SUM_TOLERANCE
    if off.any():
        first = np.flatnonzero(off)[:5]
        raise ConfigurationError(
            f"{fmt_count(int(off.sum()))} of {fmt_count(len(frame))} rows of {data_name} have probabilities of "
            f"'{column}' ({', '.join(groups.values())}) that do not sum to 1 (largest gap {gap.max():.3g}, first rows "
            f"{', '.join(map(str, first))}); every group of the attribute needs its column and each row must sum to 1 "
            f"within {SUM_TOLERANCE:g}: add the missing group or renormalise the estimates where they are made; "
            "nothing was written")
    return matrix


def draw_groups(probabilities: np.ndarray, names: Sequence[str], seed: int) -> np.ndarray:
    """One completed protected attribute: c_i drawn from row i's probabilities (inverse CDF of one uniform per row).

    Parameters
    ----------
    probabilities : ndarray of shape (n, n_groups)
        From :func:`probability_matrix`.
    names : sequence of str, length n_groups
    seed : int
        Seeds ``numpy.random.default_rng``; the same seed draws the same groups.

    Returns
    -------
    ndarray of shape (n,), object
        A group name per row.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    u = np.random.default_rng(int(seed)).random(len(p))
    cdf = np.cumsum(p, axis=1)
    cdf[:, -1] = np.inf                                   # a row summing to 1 − 1e-7 still draws a group
    index = (u[:, None] >= cdf).sum(axis=1)
    return np.asarray(list(names), dtype=object)[index]


def expected_auc_binary(p: np.ndarray) -> float:
    """Expected ROC-AUC of scores p against labels drawn as Bernoulli(p), ties counted ½.

    E[AUC] ≈ Σ_{i≠j} p_i (1 − p_j) K(p_i, p_j) / Σ_{i≠j} p_i (1 − p_j), K = 1 if p_i > p_j, ½ if equal, 0 if less
    (the ratio of the expectations of the Mann–Whitney numerator and denominator; exact as n grows). O(n log n).

    Parameters
    ----------
    p : ndarray of shape (n,)
        Probabilities of the group, in [0, 1].

    Returns
    -------
    float
        In [0.5, 1] for calibrated p; NaN when no pair has both a possible member and a possible non-member.
    """
    p = np.asarray(p, dtype=np.float64)
    values, inverse = np.unique(p, return_inverse=True)
    mass = np.bincount(inverse, weights=p, minlength=len(values))          # Σ p over rows with that value
    below = np.concatenate([[0.0], np.cumsum(mass)[:-1]])                 # Σ p_i over p_i < value
    above = p.sum() - below - mass                                        # Σ p_i over p_i > value
    per_row = above[inverse] + 0.5 * (mass[inverse] - p)                  # i ≠ j: the row's own p left out
    numerator = float(((1.0 - p) * per_row).sum())
    denominator = float(p.sum() * (1.0 - p).sum() - (p * (1.0 - p)).sum())
    return numerator / denominator if denominator > 0 else float("nan")


def expected_auc(probabilities: np.ndarray) -> float:
    """How sharp the group probabilities are: the expected ROC-AUC against c drawn from them.

    Two groups: :func:`expected_auc_binary` of the second group's column (the same for either). More groups: the
    one-vs-rest macro average over groups (Hand & Till 2001 use pairs; one-vs-rest is scikit-learn's ``ovr``).

    Parameters
    ----------
    probabilities : ndarray of shape (n, n_groups)

    Returns
    -------
    float
        0.5 for probabilities that are the same on every row; 1 for 0/1 probabilities; NaN if undefined.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    if p.shape[1] == 2:
        return expected_auc_binary(p[:, 1])
    aucs = [expected_auc_binary(p[:, g]) for g in range(p.shape[1])]
    finite = [a for a in aucs if np.isfinite(a)]
    return float(np.mean(finite)) if finite else float("nan")


def discrimination(probabilities: np.ndarray) -> float:
    """Tjur's coefficient of discrimination λ of calibrated group probabilities: E[p | c = g] − E[p | c ≠ g].

    With c drawn from the probabilities (calibrated), E[p | c = g] = E[p²] / E[p] and E[p | c ≠ g] =
    E[p(1 − p)] / E[1 − p], both computable from the probabilities alone. Probabilities calibrated given a signal of c
    but blind to the features give a drawn c̃ with P(c̃ = g | x) = E[p | c ≠ g] + λ·(P(c = g | x) − ...): the group
    contrast the auxiliary model sees is shrunk by λ (the worst case the estimated check guards a pass against).

    Parameters
    ----------
    probabilities : ndarray of shape (n, n_groups)
        Rows summing to 1.

    Returns
    -------
    float
        In [0, 1]: 0 for probabilities that are the same on every row, 1 for 0/1 probabilities. Two groups: the same
        from either column; more groups: the minimum over the one-vs-rest values. NaN when no group's value is defined.

    Notes
    -----
    Tjur (2009), *Coefficients of determination in logistic regression models*, The American Statistician 63:366-372.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    values = []
    for g in range(p.shape[1]):
        q = p[:, g]
        mass, rest = float(q.sum()), float((1.0 - q).sum())
        if mass > 0 and rest > 0:
            values.append(float((q * q).sum()) / mass - float((q * (1.0 - q)).sum()) / rest)
    return float(min(values)) if values else float("nan")


def check_probabilities_not_input(feature_spec, columns: Sequence[str]) -> None:
    """Refuse a feature spec that feeds a probability column of c to the target model.

    Raises
    ------
    ConfigurationError
        The spec's input columns include one of ``columns``: each named, and the fix.
    """
    if feature_spec is None:
        return
    named = [c for c in columns if c in feature_spec.source_columns]
    if named:
        raise ConfigurationError(f"the feature spec feeds the protected attribute's probability column(s) {named} to "
                                 "the target model; they are estimates of c and never a model input: remove them from "
                                 "the spec; nothing was written")
