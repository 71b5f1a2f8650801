"""Mechanisms on real rows with an exact counterfactual: ground truth for the cases the proxy family lacks.

:mod:`faux_checks.groundtruth.proxy` injects four fixed proxies. The gate must also read the mechanisms
a risk team meets in practice, each exact by construction: real rows give what c does not cause (z⊥ of
Definition 1), a protected attribute c is drawn independently of them, the columns c causes are
generated from c and stored noise, and the counterfactual regenerates them for another c with the same
noise and everything else fixed. Every mechanism is our construction (no code or data of the paper or of
an outside benchmark):

============  ==============================================================================================
mechanism     columns c causes (e(c), w(c) as in :mod:`~faux_checks.groundtruth.proxy`)
============  ==============================================================================================
``ratio``     ``ratio_proxy = L′ · (1 + s·w(c)) + ½ε``, L′ = max(0.1, 2 + (L − mean L) / sd L): a proxy built **multiplicatively** from a
              real legitimate feature L (``tenure = experience/10 · (1 + 0.8c) + noise``); L itself is
              not caused by c but is informative about c given the proxy
``weak``      ``weak_1 … weak_K = s·e_j(c) + ε_j``: many proxies, each weak (K = 10)
``redraw``    a real categorical column **re-drawn** with c-dependent level probabilities
              p_c(k) ∝ p(k)·exp(s·e₁(c)·r_k) (r_k the level's standardised rank in a fixed order),
              by inverse-CDF coupling: level = F_c⁻¹(u) with u the row's real level's own position in
              the real CDF (so the re-drawn column keeps its real relation to y where p_c ≈ p)
``mediator``  ``mediator = L_m + s·e₁(c) + ¼ε`` (an **admissible** mediator c causes legitimately, on a
              real feature L_m) and ``proxy = s·e₂(c) + ε`` (a non-admissible proxy); ``weak_mediator``: the
              same with a **weak** mediator, s_m = 0.2 in its place of s (its group contrast alone reads c
              at a ROC-AUC of about 0.6)
``subgroup``  ``local_proxy = s·e₁(c)·1[row in S] + ε``: c shows only inside a real subgroup S
``ordered``   ``ordered_proxy``: an **ordered** 4-level categorical, the bin of s·e₁(c) + ε at fixed
              thresholds, and a weak numeric ``proxy = ½s·e₂(c) + ε``
``multicat``  ``cat_proxy``: a 5-level categorical by inverse-CDF coupling along a fixed order with
              class-specific probabilities ∝ exp(s·W_k·e(c)) (designed for a 3-class c)
``names``     ``first_name``: a **definitional link with many values**, three names per (group, level of a
              real categorical column R) cell; the name index is the stored noise, so c′ gets the name
              of the same index in its own cell (``links``: the names of each (group, level of R), declared
              ``by`` R, so that a linked-columns counterfactual keeps the row's level of R as this one does)
============  ==============================================================================================

Labels, ``label_bias`` (the recorded label y; ``bias`` in [0, 1]):

- ``"flip"``: each favourable label (1) is recorded as 0 with probability ``bias · w(c)`` (as
  :mod:`~faux_checks.groundtruth.proxy`); ``subgroup`` flips only inside S.
- ``"threshold"``: a real **continuous** outcome o (standardised) decides the label, with the
  disadvantaged shifted: y = 1[o − bias · w(c) > median(o)] (a threshold shift, not a flip).

IFS(x) = max over c′ of |f(x(c)) − f(x(c′))|, c′ every other group or c ± 1 sd (continuous), the
declared admissible columns held at their own values (a mediator is admissible: its value stays),
every other column c causes regenerated, z⊥ and the noise fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Literal

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError
from ..kinds import Kind
from .proxy import check_kind_and_bias, disadvantage, protected_embedding, InjectedProtected

__all__ = ["MECHANISMS", "MechanismData", "make_mechanism_data", "mechanism_fairness_scores"]

MECHANISMS = ("ratio", "weak", "redraw", "mediator", "weak_mediator", "subgroup", "ordered", "multicat", "names")
#: Mechanism strengths s (chosen so that a 64-64 aux model reaches a held-out ROC-AUC of about 0.8–0.9).
DEFAULT_STRENGTH = {"ratio": 0.8, "weak": 0.3, "redraw": 1.2, "mediator": 0.6, "weak_mediator": 0.6, "subgroup": 1.2,
                    "ordered": 1.0, "multicat": 1.4}
#: s_m of ``weak_mediator``: the mediator's shift per unit of e₁(c).
WEAK_MEDIATOR_STRENGTH = 0.2
N_WEAK = 10
ORDERED_LEVELS = ("low", "mid", "high", "top")
ORDERED_CUTS = (-0.8, 0.2, 1.2)
CAT_LEVELS = ("p", "q", "r", "s", "t")
NAMES_PER_CELL = 3



@dataclass(frozen=True)
class MechanismData(InjectedProtected):
    """Real rows with a protected attribute and the columns it causes (:func:`make_mechanism_data`).

    Attributes
    ----------
    base : DataFrame of shape (n, p)
        Real columns c does not cause (z⊥), without the label and without any column a mechanism replaces.
    c : ndarray of shape (n,)
        int64 group index, or float64 (continuous).
    kind : {"binary", "multiclass", "continuous"}
    n_groups : int
        m (2 binary, 0 continuous).
    mechanism : str
        One of :data:`MECHANISMS`.
    noise : dict of ndarray
        Stored noise, first axis n (regenerated columns reuse it).
    params : dict
        What the mechanism needs besides noise (the real column it builds on, level tables, ...).
    y, y_recorded : ndarray of shape (n,), int64
        The recorded (biased) label and the real one.
    bias : float
    label_bias : {"flip", "threshold"}
    admissible : tuple of str
        The columns a policy would declare admissible: the real legitimate block, and the mediator.
    links : dict
        ``names``: the definitional link as a policy's ``[linked_columns]`` declares it,
        ``{"first_name": {"by": R, group name: {level of R: [values]}}}`` (three values per group and level).
    """

    base: pd.DataFrame
    c: np.ndarray
    kind: str
    n_groups: int
    mechanism: str
    noise: dict
    params: dict
    y: np.ndarray
    y_recorded: np.ndarray
    bias: float
    label_bias: str
    admissible: tuple = ()
    links: dict = field(default_factory=dict)
    protected_name: str = "c"

    def __len__(self) -> int:
        return len(self.c)

    def caused(self, c=None) -> pd.DataFrame:
        """The columns c causes, for protected values ``c`` (default: the rows' own), same noise."""
        c = self.c if c is None else np.asarray(c)
        return _BUILDERS[self.mechanism](self, c)

    def frame(self, c=None) -> pd.DataFrame:
        """What a target can see for protected values ``c``: the real block and the caused columns."""
        return pd.concat([self.base, self.caused(c)], axis=1)

    def counterfactual_frame(self, c_new) -> pd.DataFrame:
        """:meth:`frame` for ``c_new`` with the admissible caused columns (a mediator) kept at the rows' own values."""
        out = self.frame(c_new)
        own = self.caused()
        for col in own.columns:
            if col in self.admissible:
                out[col] = own[col]
        return out

    @property
    def index(self) -> pd.Index:
        return self.base.index

    def subset(self, rows) -> "MechanismData":
        """The same data restricted to ``rows`` (index array or bool mask), re-indexed 0..n−1."""
        rows = np.asarray(rows)
        return replace(self, base=self.base.iloc[rows].reset_index(drop=True), c=self.c[rows],
                       noise={k: v[rows] for k, v in self.noise.items()}, y=self.y[rows],
                       y_recorded=self.y_recorded[rows])


# ---------------------------------------------------------------------------- the mechanisms
def _w(data: MechanismData, c) -> np.ndarray:
    return disadvantage(c, data.kind, data.n_groups)


def _e(data: MechanismData, c) -> np.ndarray:
    return protected_embedding(c, data.kind, data.n_groups)


def _ratio(data, c):
    s = data.params["s"]
    return pd.DataFrame({"ratio_proxy": data.noise["L"] * (1.0 + s * _w(data, c)) + 0.5 * data.noise["eps"]},
                        index=data.base.index)


def _weak(data, c):
    e, s = _e(data, c), data.params["s"]
    angles = data.params["angles"]
    cols = {}
    for j, phi in enumerate(angles):
        cols[f"weak_{j + 1}"] = s * (np.cos(phi) * e[:, 0] + np.sin(phi) * e[:, 1]) + data.noise["eps"][:, j]
    return pd.DataFrame(cols, index=data.base.index)


def _level_probabilities(p_real: np.ndarray, ranks: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """(n, K): p(k)·exp(shift·r_k), normalised per row."""
    logits = np.log(p_real)[None, :] + shift[:, None] * ranks[None, :]
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def _inverse_cdf(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Level index (n,) with u (n,) in [0, 1) under per-row probabilities p (n, K)."""
    cdf = np.cumsum(p, axis=1)
    return np.minimum((u[:, None] >= cdf).sum(axis=1), p.shape[1] - 1)


def _redraw(data, c):
    p = _level_probabilities(data.params["p_real"], data.params["ranks"], data.params["s"] * _e(data, c)[:, 0])
    levels = np.asarray(data.params["levels"], dtype=object)
    return pd.DataFrame({data.params["column"]: levels[_inverse_cdf(p, data.noise["u"])]}, index=data.base.index)


def _mediator(data, c):
    e, s = _e(data, c), data.params["s"]
    s_m = data.params.get("s_m", s)
    return pd.DataFrame({"mediator": data.noise["L"] + s_m * e[:, 0] + 0.25 * data.noise["eps_m"],
                         "proxy": s * e[:, 1] + data.noise["eps_p"]}, index=data.base.index)


def _subgroup(data, c):
    inside = data.noise["inside"]
    return pd.DataFrame({"local_proxy": data.params["s"] * _e(data, c)[:, 0] * inside + data.noise["eps"]},
                        index=data.base.index)


def _ordered(data, c):
    e, s = _e(data, c), data.params["s"]
    latent = s * e[:, 0] + data.noise["eps"]
    level = np.searchsorted(np.asarray(ORDERED_CUTS), latent)
    return pd.DataFrame({"ordered_proxy": np.asarray(ORDERED_LEVELS, dtype=object)[level],
                         "proxy": 0.5 * s * e[:, 1] + data.noise["eps_p"]}, index=data.base.index)


def _multicat(data, c):
    e, s = _e(data, c), data.params["s"]
    angle = 2 * np.pi * np.arange(len(CAT_LEVELS)) / len(CAT_LEVELS) + 0.5
    W = np.stack([np.cos(angle), np.sin(angle)], axis=1)                       # (K, 2)
    logits = s * e @ W.T
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return pd.DataFrame({"cat_proxy": np.asarray(CAT_LEVELS, dtype=object)[_inverse_cdf(p, data.noise["u"])]},
                        index=data.base.index)


def _names(data, c):
    cell = data.noise["cell_of_row"]                                            # (n,) index of R's level
    names = data.params["names"]                                                # (m, n_levels, NAMES_PER_CELL)
    return pd.DataFrame({"first_name": names[np.asarray(c, dtype=np.int64), cell, data.noise["name_index"]]},
                        index=data.base.index)


_BUILDERS: dict[str, Callable] = {"ratio": _ratio, "weak": _weak, "redraw": _redraw, "mediator": _mediator,
                                  "weak_mediator": _mediator,
                                  "subgroup": _subgroup, "ordered": _ordered, "multicat": _multicat, "names": _names}


# ---------------------------------------------------------------------------- construction
def _numeric(frame: pd.DataFrame, column: str, what: str) -> np.ndarray:
    if column not in frame.columns or not pd.api.types.is_numeric_dtype(frame[column]):
        raise InputError(f"{what} '{column}' must be a numeric column of the features; columns: "
                         f"{list(map(str, frame.columns))}")
    z = frame[column].to_numpy(dtype=np.float64)
    return z


def _categorical(frame: pd.DataFrame, column: str, what: str) -> np.ndarray:
    if column not in frame.columns or pd.api.types.is_numeric_dtype(frame[column]):
        raise InputError(f"{what} '{column}' must be a categorical (text) column of the features; columns: "
                         f"{list(map(str, frame.columns))}")
    return frame[column].astype(str).to_numpy()


def make_mechanism_data(features: pd.DataFrame, labels, *, mechanism: str, kind: Kind = "binary", n_groups: int = 3,
                        bias: float = 0.0, label_bias: Literal["flip", "threshold"] = "flip", outcome=None,
                        column: str | None = None, subgroup: tuple[str, str] | None = None,
                        strength: float | None = None, seed: int = 0, protected_name: str = "c") -> MechanismData:
    """Inject a protected attribute and the columns it causes into real rows (module docstring).

    Parameters
    ----------
    features : DataFrame of shape (n, p)
        Real rows, no missing values, no label.
    labels : array of shape (n,)
        Their real 0/1 label (``label_bias = "flip"``).
    mechanism : str
        One of :data:`MECHANISMS`.
    kind : {"binary", "multiclass", "continuous"}
    n_groups : int
        m for multi-class (≥ 3).
    bias : float in [0, 1]
    label_bias : {"flip", "threshold"}
    outcome : array of shape (n,), optional
        The real continuous outcome ``"threshold"`` reads (required there).
    column : str, optional
        The real column a mechanism builds on: numeric for ``ratio`` (L), ``mediator`` and ``weak_mediator``
        (L_m; each is moved out of the real block), categorical for ``redraw`` (replaced) and ``names`` (the column R whose
        level with the group selects the names; kept).
    subgroup : (column, level), optional
        ``subgroup``: the real subgroup S = rows whose ``column`` equals ``level``.
    strength : float, optional
        s (default :data:`DEFAULT_STRENGTH`).
    seed : int
    protected_name : str

    Returns
    -------
    MechanismData

    Raises
    ------
    InputError
        An unknown mechanism or kind, a bias outside [0, 1], labels other than 0/1, missing values,
        a missing or wrong-typed ``column``, ``threshold`` without an outcome, an empty subgroup.
    """
    _check_arguments(mechanism, kind, bias, n_groups)
    frame = features.reset_index(drop=True).copy()
    missing = int(frame.isna().any(axis=1).sum())
    if missing:
        raise InputError(f"the features have {fmt_count(missing)} rows with missing values; drop or impute them")
    y = np.asarray(labels)
    n = len(frame)
    if len(y) != n or not np.isin(y, (0, 1)).all():
        raise InputError(f"labels must be {fmt_count(n)} values in {{0, 1}}")
    rng = np.random.default_rng(seed)
    m = {"binary": 2, "multiclass": n_groups, "continuous": 0}[kind]
    c = rng.standard_normal(n) if kind == "continuous" else rng.integers(0, m, n)
    params: dict = {"s": float(DEFAULT_STRENGTH.get(mechanism, 1.0) if strength is None else strength)}
    noise, links = _draw_noise(mechanism, frame, column=column, subgroup=subgroup, m=m, rng=rng, params=params)
    legit = [str(col) for col in frame.columns]
    if mechanism in ("ratio", "mediator", "weak_mediator", "redraw"):   # the real column the caused one replaces leaves the block
        assert column is not None                      # _numeric / _categorical raised on a missing column
        frame = frame.drop(columns=[column])
        legit.remove(column)
    admissible_extra = ["mediator"] if mechanism in ("mediator", "weak_mediator") else []
    y_recorded, y_biased = _biased_labels(y, disadvantage(c, kind, m), bias=bias, label_bias=label_bias,
                                          outcome=outcome, inside=noise.get("inside") if mechanism == "subgroup" else None,
                                          rng=rng)
    return MechanismData(base=frame, c=c, kind=kind, n_groups=m, mechanism=mechanism, noise=noise, params=params,
                         y=y_biased, y_recorded=y_recorded, bias=float(bias), label_bias=label_bias,
                         admissible=tuple(legit + admissible_extra), links=links, protected_name=protected_name)


def _check_arguments(mechanism: str, kind: str, bias: float, n_groups: int) -> None:
    """Raise :class:`InputError` for an unknown mechanism or kind, a bias outside [0, 1], or too few groups."""
    if mechanism not in MECHANISMS:
        raise InputError(f"mechanism must be one of {list(MECHANISMS)}, got {mechanism!r}")
    check_kind_and_bias(kind, bias, n_groups)
    if mechanism == "names" and kind == "continuous":
        raise InputError("the 'names' mechanism needs protected groups (binary or multi-class), not a continuous c")


def _draw_noise(mechanism: str, frame: pd.DataFrame, *, column: str | None, subgroup: tuple[str, str] | None,
                m: int, rng: np.random.Generator, params: dict) -> tuple[dict, dict]:
    """The stored noise of ``mechanism``'s caused columns (drawn from ``rng`` in a fixed order) and its definitional
    links; ``params`` gains the mechanism's fixed parameters. ``frame`` is read, not modified."""
    n = len(frame)
    if mechanism == "ratio":
        L = _numeric(frame, column or "", "ratio's column")
        return {"L": np.maximum(2.0 + (L - L.mean()) / (L.std() or 1.0), 0.1), "eps": rng.standard_normal(n)}, {}
    if mechanism == "weak":
        params["angles"] = np.linspace(0.0, np.pi / 2, N_WEAK)
        return {"eps": rng.standard_normal((n, N_WEAK))}, {}
    if mechanism == "redraw":
        return _redraw_noise(frame, column, rng, params), {}
    if mechanism in ("mediator", "weak_mediator"):
        if mechanism == "weak_mediator":
            params["s_m"] = WEAK_MEDIATOR_STRENGTH
        L = _numeric(frame, column or "", "mediator's column")
        return {"L": (L - L.mean()) / (L.std() or 1.0), "eps_m": rng.standard_normal(n),
                "eps_p": rng.standard_normal(n)}, {}
    if mechanism == "subgroup":
        if subgroup is None:
            raise InputError("the 'subgroup' mechanism needs subgroup=(column, level)")
        inside = _categorical(frame, subgroup[0], "subgroup's column") == str(subgroup[1])
        if not inside.any() or inside.all():
            raise InputError(f"subgroup {subgroup} holds {fmt_count(int(inside.sum()))} of {fmt_count(n)} rows; "
                             "choose a level that splits the rows")
        return {"eps": rng.standard_normal(n), "inside": inside.astype(np.float64)}, {}
    if mechanism == "ordered":
        return {"eps": rng.standard_normal(n), "eps_p": rng.standard_normal(n)}, {}
    if mechanism == "multicat":
        return {"u": rng.random(n)}, {}
    R = _categorical(frame, column or "", "names' column")                    # mechanism == "names"
    r_levels = sorted(set(R))
    cell = np.asarray([r_levels.index(v) for v in R])
    names = np.asarray([[[f"name_g{g}_{r}_{i}" for i in range(NAMES_PER_CELL)] for r in range(len(r_levels))]
                        for g in range(m)], dtype=object)
    params.update(names=names, r_levels=r_levels)
    links = {"first_name": {"by": column, **{f"g{g}": {level: [str(v) for v in names[g, r]]
                                                       for r, level in enumerate(r_levels)} for g in range(m)}}}
    return {"name_index": rng.integers(0, NAMES_PER_CELL, n), "cell_of_row": cell}, links


def _redraw_noise(frame: pd.DataFrame, column: str | None, rng: np.random.Generator, params: dict) -> dict:
    """``redraw``: each row's uniform u within its real level's stretch of the real CDF (levels by real frequency);
    ``params`` gains the column, its levels, their real shares and standardised ranks."""
    values = _categorical(frame, column or "", "redraw's column")
    levels, counts = np.unique(values, return_counts=True)
    order = np.argsort(-counts, kind="stable")                            # a fixed order: by real frequency
    levels, counts = levels[order], counts[order]
    p_real = counts / counts.sum()
    index = {lv: i for i, lv in enumerate(levels)}
    k = np.asarray([index[v] for v in values])
    cdf = np.concatenate([[0.0], np.cumsum(p_real)])
    u = cdf[k] + rng.random(len(frame)) * p_real[k]                       # the real level's own stretch of the CDF
    ranks = (np.arange(len(levels)) - (len(levels) - 1) / 2) / max(1.0, (len(levels) - 1) / 2)
    params.update(column=column, levels=list(levels), p_real=p_real, ranks=ranks)
    return {"u": np.minimum(u, np.nextafter(1.0, 0.0))}


def _biased_labels(y: np.ndarray, w: np.ndarray, *, bias: float, label_bias: str, outcome, inside: np.ndarray | None,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The recorded label and its biased version (module docstring, ``label_bias``), both int64 of shape (n,).

    ``w`` is the disadvantage w(c); ``inside`` (``subgroup``) limits the flips to S.
    """
    n = len(y)
    y_recorded: np.ndarray = y.astype(np.int64)
    if label_bias == "flip":
        hit = w * bias
        if inside is not None:
            hit = hit * inside
        suppressed = (y_recorded == 1) & (rng.random(n) < hit)
        return y_recorded, np.where(suppressed, 0, y_recorded)
    if label_bias == "threshold":
        if outcome is None or len(outcome) != n:
            raise InputError("label_bias = 'threshold' needs the real continuous outcome of every row (outcome=...)")
        o = np.asarray(outcome, dtype=np.float64)
        o = (o - o.mean()) / (o.std() or 1.0)
        return (o > np.median(o)).astype(np.int64), (o - bias * w > np.median(o)).astype(np.int64)
    raise InputError(f"label_bias must be 'flip' or 'threshold', got {label_bias!r}")


def mechanism_fairness_scores(predict: Callable[[pd.DataFrame], np.ndarray], data: MechanismData) -> np.ndarray:
    """Ground-truth IFS of every individual (module docstring), in probability points.

    Parameters
    ----------
    predict : callable
        DataFrame (as :meth:`MechanismData.frame`) -> P(y = 1), ndarray of shape (n,).
    data : MechanismData

    Returns
    -------
    ndarray of shape (n,), float64: max over c′ of |f(x(c)) − f(x(c′))|, admissible caused columns held.
    """
    p = np.asarray(predict(data.frame()), dtype=np.float64)
    changes = [np.abs(np.asarray(predict(data.counterfactual_frame(c)), dtype=np.float64) - p)
               for c in data.counterfactual_protected()]
    return np.max(changes, axis=0)

