"""The matched value of a feature released from the hold because it carries c only jointly with held partners.

:func:`~faux_checks.method.joint_hold.jointly_free_hold` releases one member of a set of columns that carries c
together (x1, x2 ~ N(0, 1) and c = 1[x1·x2 > 0]). The matched move of :class:`~faux_checks.method.matching.FeatureMatching`
reads a free feature's level from a **linear** model of the held features and matches the residual's rank; the
conditional law of the released member given its partner is not linear in it (given x2, x1's sign is set by c and by
sign(x2)), so the linear model sees no difference between the groups and the residual's rank moves the person little.

:class:`JointConditional` matches each released feature's rank within its partners' neighbourhood instead: among the
K reference rows of the person's group nearest in the partners (the held groups that carried c with it), the person's
mid-rank u in the released feature, and then the value at rank u among the K nearest rows of the other group — the
monotone (rank-preserving) coupling of the two conditional laws, the coupling the matched move uses everywhere
(Definition 1's counterfactual with rank kept; the conditional quantiles are k-nearest-neighbour estimates, Biau
and Devroye 2015, "Lectures on the Nearest Neighbor Method", ch. 4). Which member of the set c causes, and whether
the people keep their rank (rather than, say, every value reflecting), are not identified by the data
(docs/benchmark.md, "Joint-only proxies").
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .._validation import fmt_count
from ..errors import InputError

__all__ = ["JOINT_NEIGHBOURS", "JointConditional", "fit_joint_conditional", "joint_released", "with_joint_move"]

#: Neighbours per group whose values give a released feature's conditional rank and quantile (at most the group's rows).
JOINT_NEIGHBOURS = 50


@dataclass(frozen=True)
class JointConditional:
    """Rank matching of released features within their held partners' neighbourhood (module docstring).

    Attributes
    ----------
    columns : ndarray of shape (k,), int64
        The released features' positions in the aux input space.
    context : ndarray of shape (h,), int64
        The partner features' positions in the aux input space (held).
    scale : ndarray of shape (h,)
        The partners' standard deviations on the reference rows (distances in sd units).
    rows : dict of int -> (ndarray (n_g, h), ndarray (n_g, k))
        Per group: the reference rows' partner values and released values.
    neighbours : int
    """

    columns: np.ndarray
    context: np.ndarray
    scale: np.ndarray
    rows: dict = field(default_factory=dict)
    neighbours: int = JOINT_NEIGHBOURS

    def _trees(self) -> dict:
        from scipy.spatial import cKDTree

        cache = self.__dict__.get("_tree_cache")                            # frozen dataclass: no __setattr__
        if cache is None:                                                   # built whole, then published: threads
            cache = self.__dict__.setdefault("_tree_cache", {g: cKDTree(ctx / self.scale)   # never see it half-filled
                                                             for g, (ctx, _) in self.rows.items()})
        return cache

    def _near(self, g: int, ctx: np.ndarray) -> np.ndarray:
        """(n, K, k) released values of the K reference rows of group g nearest to ``ctx`` (n, h), sorted along K."""
        vals = self.rows[g][1]
        k = min(self.neighbours, len(vals))
        _, idx = self._trees()[g].query(ctx / self.scale, k=k)
        return np.sort(vals[np.asarray(idx).reshape(len(ctx), k)], axis=1)

    def values(self, x_aux: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(n, k) matched values of the released features for rows ``x_aux`` (n, d_aux) moving from group a to b (n,).

        The mid-rank u ∈ (0, 1) of the row's value among its K nearest rows of group a (ties counted half), then the
        value at position u·K − ½ (linear interpolation, clipped to the ends) among the K nearest rows of group b.
        """
        x = np.asarray(x_aux, dtype=np.float64)
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        out = np.empty((len(x), len(self.columns)))
        ctx, own = x[:, self.context], x[:, self.columns]
        for ga in np.unique(a):
            for gb in np.unique(b[a == ga]):
                rows = np.flatnonzero((a == ga) & (b == gb))
                src, dst = self._near(int(ga), ctx[rows]), self._near(int(gb), ctx[rows])
                v = own[rows][:, None, :]
                u = ((src < v).sum(axis=1) + 0.5 * (src == v).sum(axis=1)) / src.shape[1]     # (r, k)
                pos = np.clip(u * dst.shape[1] - 0.5, 0.0, dst.shape[1] - 1.0)
                lo = np.floor(pos).astype(np.int64)
                hi = np.minimum(lo + 1, dst.shape[1] - 1)
                w = pos - lo
                low, high = (np.take_along_axis(dst, i[:, None, :], axis=1)[:, 0, :] for i in (lo, hi))
                out[rows] = (1 - w) * low + w * high
        return out

    def to_dict(self) -> dict:
        """JSON types of every field (the reference rows per group included), read back by :meth:`from_dict`."""
        return {"columns": self.columns.tolist(), "context": self.context.tolist(), "scale": self.scale.tolist(),
                "neighbours": self.neighbours,
                "rows": [[g, ctx.tolist(), vals.tolist()] for g, (ctx, vals) in sorted(self.rows.items())]}

    @classmethod
    def from_dict(cls, payload: dict) -> "JointConditional":
        """The :class:`JointConditional` :meth:`to_dict` wrote (JSON types: lists of floats and ints)."""
        arr = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
        return cls(columns=np.asarray(payload["columns"], dtype=np.int64),
                   context=np.asarray(payload["context"], dtype=np.int64), scale=arr(payload["scale"]),
                   rows={int(g): (arr(ctx), arr(vals)) for g, ctx, vals in payload["rows"]},
                   neighbours=int(payload["neighbours"]))


def fit_joint_conditional(X_ref: np.ndarray, c_ref: np.ndarray, columns, context,
                          neighbours: int = JOINT_NEIGHBOURS, n_groups: int = 0) -> JointConditional:
    """:class:`JointConditional` of the released ``columns`` given the held ``context`` on the reference rows.

    Parameters
    ----------
    X_ref : ndarray of shape (n, d)
        Reference rows in the aux input space.
    c_ref : ndarray of shape (n,), int
        Their group index 0..m−1.
    columns, context : sequence of int
        Released features; their held partners (disjoint, both non-empty).
    neighbours : int
        K, the neighbours per group (:data:`JOINT_NEIGHBOURS`).
    n_groups : int
        m, the protected groups the move reads (a group absent from the reference rows counts 0); 0: those present.

    Returns
    -------
    JointConditional

    Raises
    ------
    InputError
        Empty or overlapping ``columns`` / ``context``, or a group with fewer than 2 reference rows.
    """
    X = np.asarray(X_ref, dtype=np.float64)
    c = np.asarray(c_ref, dtype=np.int64)
    cols, ctx = np.asarray(columns, dtype=np.int64), np.asarray(context, dtype=np.int64)
    if not len(cols) or not len(ctx) or np.intersect1d(cols, ctx).size:
        raise InputError(f"the joint move needs released features and held partners, disjoint; got {cols.tolist()} "
                         f"and {ctx.tolist()}")
    counts = np.bincount(c, minlength=int(n_groups))
    if (counts < 2).any():
        raise InputError(f"every protected group needs at least 2 reference rows for the joint move; counts "
                         f"{counts.tolist()} ({fmt_count(int(counts.min()))} in the smallest): audit more rows of "
                         "the smallest group, or declare the released columns' partners admissible")
    scale = X[:, ctx].std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    rows = {g: (X[c == g][:, ctx], X[c == g][:, cols]) for g in range(len(counts))}
    return JointConditional(columns=cols, context=ctx, scale=scale, rows=rows, neighbours=int(neighbours))


def joint_released(summary, held, matched, kind) -> tuple[list[int], list[int]] | None:
    """The released features the joint move matches and their held partners, from the joint test's ``summary``.

    Parameters
    ----------
    summary : dict or None
        :func:`~faux_checks.method.joint_hold.jointly_free_hold`'s summary (``steps`` with ``released`` and
        ``partners``; ``joint_free`` with ``features`` and ``partners``).
    held : bool array of shape (d,)
        What the move holds (declared and held features).
    matched : bool array of shape (d,) or None
        The features the matched move moves (None: another reading).
    kind : Kind

    Returns
    -------
    (columns, context) or None
        The released features that are matched and have a partner still held, and those partners; None when there
        are none (a continuous c, another reading, nothing released, or no partner held).
    """
    from ..kinds import protected_kind

    if not summary or matched is None or not protected_kind(kind).grouped:
        return None
    held, matched = np.asarray(held, dtype=bool), np.asarray(matched, dtype=bool)
    columns: set[int] = set()
    context: set[int] = set()
    pairs = [(s.get("released", []), s.get("partners", [])) for s in summary.get("steps", [])]
    for moving, with_ in pairs + [(e["features"], e["partners"]) for e in summary.get("joint_free", [])]:
        moved = [j for j in moving if matched[j]]
        partners = [j for j in with_ if held[j]]
        if moved and partners:
            columns.update(moved)
            context.update(partners)
    return (sorted(columns), sorted(context)) if columns else None


def with_joint_move(reference, summary, X_ref: np.ndarray, c_ref):
    """``reference`` (a :class:`~faux_checks.method.swap.SwapReference`) with its matching's ``joint`` fitted where the
    joint test released matched features with held partners (:func:`joint_released`); otherwise ``reference`` itself.

    ``X_ref`` (n, d) and ``c_ref`` (n,): the reference rows the matching was fitted on; what the move holds is the
    reference's ``admissible``, what it matches its matching's ``positions``. Raises what :func:`fit_joint_conditional`
    raises.
    """
    if reference.matching is None:
        return reference
    matched: np.ndarray = np.zeros(len(reference.admissible), dtype=bool)
    matched[reference.matching.positions] = True
    joint = joint_released(summary, reference.admissible, matched, reference.kind)
    if joint is None:                                                   # nothing released: no joint move kept
        return reference if reference.matching.joint is None else replace(
            reference, matching=replace(reference.matching, joint=None))
    return replace(reference, matching=replace(reference.matching, joint=fit_joint_conditional(
        X_ref, c_ref, *joint, n_groups=reference.n_groups)))
