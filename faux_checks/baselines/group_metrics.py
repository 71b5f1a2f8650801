"""Group fairness metrics via fairlearn (demographic parity and equalized odds differences)."""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["group_metrics", "group_table"]


def group_metrics(y_pred: np.ndarray, groups: np.ndarray, y_true: np.ndarray | None = None) -> dict[str, float]:
    """Demographic parity difference (and equalized odds difference when labels are given).

    Parameters
    ----------
    y_pred : ndarray of shape (n,)
        Binary predictions (0/1), e.g. ``P(y=1|x) > 0.5``.
    groups : ndarray of shape (n,)
        Protected group label per row.
    y_true : ndarray of shape (n,), optional
        Binary labels.

    Returns
    -------
    dict
        ``demographic_parity_difference`` (max − min selection rate over groups) and, with labels,
        ``equalized_odds_difference`` (fairlearn's: the larger of the TPR and FPR gaps), both in [0, 1].

    Raises
    ------
    InputError
        Lengths differ, or fewer than two groups.

    Notes
    -----
    fairlearn.metrics (Bird et al. 2020); group metrics say nothing about individuals and are
    reported next to fAux, not instead of it.
    """
    from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference

    y_pred = np.asarray(y_pred).astype(int)
    groups = np.asarray(groups)
    if len(y_pred) != len(groups):
        raise InputError(f"predictions have {len(y_pred)} rows but groups have {len(groups)}")
    if len(np.unique(groups)) < 2:
        raise InputError("group metrics need at least two protected groups")
    out = {"demographic_parity_difference": float(demographic_parity_difference(y_pred, y_pred, sensitive_features=groups))}
    if y_true is not None:
        y_true = np.asarray(y_true).astype(int)
        if len(np.unique(y_true)) < 2:
            raise InputError("equalized odds needs both label values in the audit data")
        out["equalized_odds_difference"] = float(equalized_odds_difference(y_true, y_pred, sensitive_features=groups))
    return out


def group_table(selected: np.ndarray, probability: np.ndarray, sensitive, *, favourable: bool | None = None,
                flagged: np.ndarray | None = None, min_count: int = 1) -> list[dict]:
    """The group-level table auditors are asked for: per group and intersection, counts, rates and impact ratios.

    Descriptive only: the gate's decision stays individual-level (the flagged fraction); this table is the
    shape of the tables bias audits ask for (selection rates and impact ratios against the most favoured
    category, e.g. NYC Local Law 144's rules, 6 RCNY § 5-301), computed with fairlearn's ``MetricFrame``.
    The selection rate there is the rate of the favourable outcome: on an adverse label (deny, default) it is
    1 − the rate of the predicted event, and the most favoured group is the one denied least.

    Parameters
    ----------
    selected : ndarray of shape (n,)
        0/1: the target's class predicted (e.g. ŷ > 0.5).
    probability : ndarray of shape (n,)
        The target's P(y = target class | x), probability points.
    sensitive : DataFrame of shape (n, a)
        One column per protected attribute (the category of each row); with a ≥ 2 columns the
        intersections are added.
    favourable : bool or None
        Whether the target's class is the favourable outcome (policy ``favourable_label``,
        :func:`faux_checks.gate.outcome.outcome_direction`); None (not declared): no favourable rate, impact
        ratio or most favoured group.
    flagged : ndarray of shape (n,), optional
        Each row's weight in the flagged count (fAux), reported per group beside the rates.
    min_count : int
        Groups with fewer rows keep their counts but their rates are None ("too few rows").

    Returns
    -------
    list of dict
        ``attribute`` (a column name, or the names joined by ``" × "``), ``group``, ``count``,
        ``predicted_rate`` (share with the target's class predicted), ``favourable_rate`` (share with the
        favourable outcome predicted), ``mean_score`` (mean ``probability``), ``impact_ratio`` (favourable rate /
        the highest favourable rate of that attribute's groups; None when that is 0), ``most_favoured`` (bool;
        None when the direction is not declared) and, with ``flagged``, ``flagged_fraction``.

    Raises
    ------
    InputError
        Lengths differ or ``sensitive`` has no column.
    """
    import pandas as pd

    frame = pd.DataFrame(sensitive).reset_index(drop=True)
    n = len(frame)
    if frame.shape[1] == 0:
        raise InputError("the group table needs at least one protected attribute column")
    arrays = {"selected": np.asarray(selected).astype(int), "probability": np.asarray(probability, dtype=np.float64)}
    if flagged is not None:
        arrays["flagged"] = np.asarray(flagged, dtype=np.float64)
    for name, a in arrays.items():
        if len(a) != n:
            raise InputError(f"{name} has {len(a)} rows but the protected attribute columns have {n}")
    frame = frame.astype(str)
    sets = [[c] for c in frame.columns]
    if frame.shape[1] >= 2:
        sets.append(list(frame.columns))
    return [row for cols in sets for row in _attribute_rows(frame[cols], arrays, favourable=favourable,
                                                            min_count=min_count)]


def _attribute_rows(sensitive, arrays: dict[str, np.ndarray], *, favourable: bool | None,
                    min_count: int) -> list[dict]:
    """:func:`group_table`'s rows of one attribute (or intersection): the columns of ``sensitive``, as text."""
    from fairlearn.metrics import MetricFrame, count, selection_rate

    cols = list(sensitive.columns)
    mean = lambda y_true, y_pred: float(np.mean(y_pred))     # noqa: E731  (a MetricFrame metric)

    def by_group(values, metric):
        return MetricFrame(metrics=metric, y_true=arrays["selected"], y_pred=values,
                           sensitive_features=sensitive).by_group

    table = by_group(arrays["selected"], {"count": count, "selection_rate": selection_rate})
    scores = by_group(arrays["probability"], mean)
    flags = by_group(arrays["flagged"], mean) if "flagged" in arrays else None
    enough = table["count"] >= min_count
    rates = table["selection_rate"] if favourable is not False else 1.0 - table["selection_rate"]
    best = rates[enough].max() if enough.any() and favourable is not None else np.nan
    rows = []
    for key, row in table.iterrows():
        key = key if isinstance(key, tuple) else (key,)
        ok = bool(row["count"] >= min_count)
        rate = float(rates.loc[key if len(key) > 1 else key[0]]) if ok and favourable is not None else None
        entry = {"attribute": " × ".join(map(str, cols)), "group": " × ".join(map(str, key)),
                 "count": int(row["count"]), "predicted_rate": float(row["selection_rate"]) if ok else None,
                 "favourable_rate": rate,
                 "mean_score": float(scores.loc[key if len(key) > 1 else key[0]]) if ok else None,
                 "impact_ratio": (rate / best) if rate is not None and np.isfinite(best) and best > 0 else None,
                 "most_favoured": None if favourable is None else bool(ok and rate == best)}
        if flags is not None:
            entry["flagged_fraction"] = float(flags.loc[key if len(key) > 1 else key[0]]) if ok else None
        rows.append(entry)
    return rows
