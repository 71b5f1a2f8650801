"""Why this person: each audited individual's estimated change split into direct, proxy and admissible parts.

For the swap reading, a person's representative counterfactual x′ (:attr:`LICResult.counterfactual`) differs
from x in c's own columns (when the target reads them), in the proxies the move changes, and never in held or
admissible columns unless declared otherwise. :func:`decompose_change` splits f(x′) − f(x) over three column
groups by their exact grouped Shapley value (:func:`faux_checks.method.decomposition.grouped_shapley`):

- ``direct``: c's own columns (0 when the target does not read them);
- ``proxies``: every other column the admissible list does not name;
- ``admissible``: the policy's ``[faux] admissible`` columns (reported, not gated);

in probability points, adding up to ``total`` = f(x′) − f(x) for each person. :func:`reason_list` names the
columns that carry each part (the per-column evidence, ranked by size, ties by name), the stable list an
adverse-action reviewer reads. Our construction.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from ..inputs.tabular import FeatureSpec
from ..method.decomposition import grouped_shapley
from ..method.result import LICResult
from ..method.output import TargetOutput, predict_probability

__all__ = ["PARTS", "column_parts", "decompose_change", "reason_list"]

#: The parts of a person's change, in the report's order.
PARTS = ("direct", "proxies", "admissible")


def column_parts(spec: FeatureSpec, protected: str, admissible: Sequence[str]) -> dict[str, str]:
    """Source column -> its part (``direct`` for the protected column, ``admissible`` for declared ones, else ``proxies``)."""
    return {c: "direct" if c == protected else "admissible" if c in set(admissible) else "proxies"
            for c in spec.source_columns}


def decompose_change(target_model, output: TargetOutput, X: np.ndarray, lic: LICResult, spec: FeatureSpec,
                     protected: str, admissible: Sequence[str], row_index: np.ndarray) -> pd.DataFrame | None:
    """Each audited person's f(x′) − f(x) in its three parts (probability points).

    Parameters
    ----------
    target_model : the target (torch module, TorchScript, or a forward-only target)
    output : TargetOutput
        The resolved output form (ŷ = P(y = target class | x)).
    X : ndarray of shape (n, d), float32
        The audited rows, encoded as the target reads them.
    lic : LICResult
        The swap reading's result with evidence (its ``counterfactual`` (n, d)).
    spec : FeatureSpec
        The encoding (which encoded columns belong to which source column).
    protected : str
        The protected column (its encoded columns are the ``direct`` part).
    admissible : sequence of str
        The declared admissible source columns.
    row_index : ndarray of shape (n,)
        Input row of each audited row (the frame's index).

    Returns
    -------
    DataFrame of shape (n, 4) or None
        ``direct``, ``proxies``, ``admissible``, ``total``; NaN on rows whose score is undefined; None
        when the variant keeps no counterfactual (the gradient readings: their evidence is per feature only).
    """
    if lic.counterfactual is None:
        return None
    parts_of = column_parts(spec, protected, admissible)
    owner = np.asarray(spec.source_columns, dtype=object)[spec.feature_to_column()]      # (d,) source column per input
    masks = {part: np.array([parts_of[c] == part for c in owner], dtype=bool) for part in PARTS}
    x = torch.as_tensor(np.asarray(X, dtype=np.float32))
    x1 = torch.as_tensor(np.asarray(lic.counterfactual, dtype=np.float32))
    bad = np.asarray(lic.undefined, dtype=bool) | ~torch.isfinite(x1).all(dim=1).numpy()
    x1 = torch.where(torch.as_tensor(bad)[:, None], x, x1)               # undefined rows: no move, NaN below
    parts = grouped_shapley(lambda p: predict_probability(target_model, p, output), x, x1, masks)
    out = pd.DataFrame({k: parts[k] for k in PARTS}, index=row_index)
    out["total"] = out[list(PARTS)].sum(axis=1)
    out.loc[bad] = np.nan
    return out


def reason_list(evidence: pd.Series, parts: pd.Series, parts_of: dict[str, str], *, top: int = 3,
                digits: int = 4) -> list[dict]:
    """The reasons for one person: per part, its value and the columns carrying it.

    Parameters
    ----------
    evidence : Series
        The person's per-source-column evidence (terms of f(x′) − f(x), probability points).
    parts : Series
        The person's ``direct``, ``proxies``, ``admissible`` (and ``total``) from :func:`decompose_change`.
    parts_of : dict
        :func:`column_parts`.
    top : int
        Columns named per part.
    digits : int
        Decimals the values are rounded to (the list reads the same on every run of the same inputs).

    Returns
    -------
    list of dict
        One per part: ``part``, ``change`` (probability points), ``columns`` (``column``, ``evidence``),
        ranked by |evidence| and then by name; a part of zero change lists no columns.
    """
    out = []
    for part in PARTS:
        value = float(parts.get(part, np.nan))
        cols = [(c, round(float(evidence[c]), digits)) for c in evidence.index if parts_of.get(c) == part]
        cols = [c for c in cols if c[1] != 0.0 and np.isfinite(c[1])]
        cols.sort(key=lambda t: (-abs(t[1]), str(t[0])))
        out.append({"part": part, "change": None if not np.isfinite(value) else round(value, digits),
                    "columns": [{"column": str(c), "evidence": v} for c, v in cols[:top]]
                    if np.isfinite(value) and round(value, digits) != 0.0 else []})
    return out
