"""Hold only what is jointly free of c: the columns the per-column tests hold, tested together.

:func:`~faux_checks.method.held.independent_features` tests each feature group's **marginal** independence
from c. A set of columns can pass one by one and still carry c together: with x1, x2 ~ N(0, 1) independent
and c = 1[x1·x2 > 0], each column is distributed alike in both groups while the pair determines c. Holding
such a set fixes exactly what the protected attribute moves, and the counterfactual then moves nothing.

:func:`jointly_free_hold` tests the block the tool's own tests hold (independent or uninformative; the
declared admissible columns are the policy's choice and stay outside it) with a cross-fitted classifier of c
(:func:`block_capacity`), and releases from the hold the group whose permutation costs that classifier the most
(when that cost is at least :data:`JOINT_SINGLE_SHARE` of the block's gain); when the block still carries c, the
fewest of the latest fit's most costly groups that leave it free (a search on how many, :func:`_release_fewest`),
so that a block of hundreds of columns costs a few fits rather than one per
column. The permutation costs recompute only the trees that read the permuted columns
(:mod:`faux_checks.method.tree_costs`) on at most :data:`JOINT_COST_ROWS` rows. The test is not conditioned on the
declared columns: a declared mediator m = z + c + ε makes a legitimate z informative about c given m (a
collider), though c does not cause z; the per-column test of :mod:`.held` is marginal for the same reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._threads import thread_map
from .._validation import fmt_count
from ..errors import InputError
from ..kinds import Kind, protected_kind
from .independence import independent_features
from .tree_costs import forest_rows

__all__ = ["JOINT_ALONE_P", "JOINT_COST_ROWS", "JOINT_FOLDS", "JOINT_MAX_ROWS", "JOINT_MIN_GROUP_ROWS",
           "JOINT_PARTNER_SHARE", "JOINT_RANK_ALPHA", "JOINT_SINGLE_SHARE", "JOINT_THREADED_COLUMNS", "JOINT_Z",
           "block_capacity", "jointly_free_hold"]

#: The held block carries c when its cross-fitted classifier lowers the per-row loss below the prior's by more
#: than this many standard errors (one-sided, ≈ 1% of free blocks released).
JOINT_Z = 2.33
#: The held block also carries c when its classifier ranks a group's rows above the others' at this one-sided
#: level (Mann–Whitney U; :func:`_rank_p_value`).
JOINT_RANK_ALPHA = 0.01
#: Folds of the cross-fitting (each row is predicted by a model that did not train on it).
JOINT_FOLDS = 3
#: Rows the test reads at most (a seeded sample of the reference rows beyond it).
JOINT_MAX_ROWS = 20_000
#: Rows per protected group (continuous c: rows) below which the block cannot be tested.
JOINT_MIN_GROUP_ROWS = 10
#: Rows the permutation costs of the held groups read at most (a seeded sample of the test's rows beyond it): they
#: rank the groups for release and name partners; the block's test itself reads every row.
JOINT_COST_ROWS = 6_000
#: The first release is the one most costly group when its permutation costs the block's classifier at least this
#: share of the block's gain over the prior (each member of a pair that carries c together costs 3-4 times the gain
#: on tests/method/test_joint_hold.py's pairs); below it one release cannot free the block, and the search for the
#: fewest starts at once (173 columns each shifted 0.1 sd by c: 0.03, benchmarks/bench_reference_fit.py).
JOINT_SINGLE_SHARE = 0.25
#: A free feature whose chi-square test of independence from c has a p-value below this tells c alone: the search
#: for joint-only members (:func:`_free_partners`) does not fit a classifier to it. Far below the classifier's own
#: levels (z 2.33, p 0.01), so that only a dependence the classifier finds anyway is skipped (the joint-only
#: members of tests/groundtruth/test_joint.py have p-values of 0.0013 and more).
JOINT_ALONE_P = 1e-4
#: Columns from which a block's folds are fitted side by side (:func:`~faux_checks._threads.thread_map`): below
#: it the gradient-boosting grower, which holds Python's lock, outweighs the histograms, and two threads cost more
#: CPU for no gain (one 20,000-row test on 2 columns: 0.23 s wall, 0.28 CPU s against 0.22 s on one thread; on 32
#: columns 0.50 s against 0.70 s at the same CPU time; on 173 columns 2.3 s against 3.3 s).
JOINT_THREADED_COLUMNS = 16
#: A held group is a released group's partner (it carried c with it) when its permutation costs the block's classifier
#: at least this share of what the released group's costs.
JOINT_PARTNER_SHARE = 0.25


def _model(kind: str, seed: int):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    settings = {"max_iter": 50, "max_leaf_nodes": 15, "min_samples_leaf": 40, "learning_rate": 0.1, "early_stopping": False,
                "random_state": seed}
    return (HistGradientBoostingRegressor(**settings) if kind == "continuous"
            else HistGradientBoostingClassifier(**settings))


def _folds(c: np.ndarray, kind: str, folds: int, seed: int) -> np.ndarray:
    """Fold index (n,) of each row: stratified by group for grouped c."""
    from sklearn.model_selection import KFold, StratifiedKFold

    splitter = (StratifiedKFold(folds, shuffle=True, random_state=seed) if protected_kind(kind).grouped
                else KFold(folds, shuffle=True, random_state=seed))
    fold: np.ndarray = np.empty(len(c), dtype=np.int64)
    for k, (_, test) in enumerate(splitter.split(np.zeros(len(c)), c)):
        fold[test] = k
    return fold


def _row_losses(pred: np.ndarray, c: np.ndarray, kind: str, sd: float) -> np.ndarray:
    """Per-row loss (n,): −log P(own group) (clipped at 1e-6), or the squared error in sd of c."""
    if kind == "continuous":
        return ((pred - c) / sd) ** 2
    return -np.log(np.clip(pred[np.arange(len(c)), c], 1e-6, 1.0))


def _predict(model, X: np.ndarray, kind: str, m: int) -> np.ndarray:
    if kind == "continuous":
        return model.predict(X)
    out = np.zeros((len(X), m))
    out[:, model.classes_] = model.predict_proba(X)
    return out


def _one_openmp_thread():
    """HistGradientBoosting's OpenMP pool at one thread: the check shares its cores with torch (oversubscribed,
    a 3-fold fit on 2 cores took 8.8 s against 0.6 s on one thread)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="openmp")


def _cross_fit(X: np.ndarray, c: np.ndarray, fold: np.ndarray, kind: str, m: int, seed: int):
    """Out-of-fold predictions ((n,) or (n, m)) and each fold's model; without columns, the training prior. From
    :data:`JOINT_THREADED_COLUMNS` columns the folds' models are fitted side by side
    (:func:`~faux_checks._threads.thread_map`: the same models on any number of threads)."""
    pred = np.zeros(len(c)) if kind == "continuous" else np.zeros((len(c), m))
    folds = range(int(fold.max()) + 1)
    if X.shape[1] == 0:
        for k in folds:
            train = fold != k
            pred[fold == k] = (c[train].mean() if kind == "continuous"
                               else np.bincount(c[train], minlength=m) / train.sum())
        return pred, [None for _ in folds]

    def fitted(k: int):
        model = _model(kind, seed).fit(X[fold != k], c[fold != k])
        return model, _predict(model, X[fold == k], kind, m)

    fits = thread_map(fitted, folds) if X.shape[1] >= JOINT_THREADED_COLUMNS else [fitted(k) for k in folds]
    for k, (_, out) in zip(folds, fits, strict=True):
        pred[fold == k] = out
    return pred, [model for model, _ in fits]


def _quality(pred: np.ndarray, c: np.ndarray, kind: str, m: int) -> dict:
    """ROC-AUC (binary), macro one-vs-rest AUC (multi-class) or R² of out-of-fold predictions, with the counts."""
    from sklearn.metrics import r2_score, roc_auc_score

    if kind == "continuous":
        return {"metric": "r2", "quality": float(r2_score(c, pred)), "n_positive": int(len(c)), "n_negative": 0}
    if kind == "binary" or m == 2:
        return {"metric": "roc_auc", "quality": float(roc_auc_score(c == 1, pred[:, 1])),
                "n_positive": int((c == 1).sum()), "n_negative": int((c != 1).sum())}
    present = np.unique(c)
    auc = float(np.mean([roc_auc_score(c == g, pred[:, g]) for g in present]))
    return {"metric": "roc_auc_ovr_macro", "quality": auc, "n_positive": int(np.bincount(c).min()),
            "n_negative": int(len(c) - np.bincount(c).min())}


def block_capacity(X_block: np.ndarray, c: np.ndarray, *, kind: Kind, seed: int = 0,
                   folds: int = JOINT_FOLDS) -> dict[str, Any]:
    """What a block of columns tells a cross-fitted classifier about c beyond c's prior.

    Parameters
    ----------
    X_block : ndarray of shape (n, k)
        The block tested.
    c : ndarray of shape (n,)
        Protected values: group index 0..m−1, or the continuous value.
    kind : {"binary", "multiclass", "continuous"}
    seed : int
        Folds and models.
    folds : int

    Returns
    -------
    dict
        ``gain`` (mean per-row loss of the training prior minus that of the block's model, out of fold: nats, or
        squared sd of c), ``z`` (gain over its standard error), ``rank_p_value`` (:func:`_rank_p_value`),
        ``carries`` (z > :data:`JOINT_Z` or rank_p_value < :data:`JOINT_RANK_ALPHA`), ``metric``,
        ``quality`` (ROC-AUC / macro AUC / R² of the block's model out of fold), ``n_positive``,
        ``n_negative``, ``rows``; and, for :func:`jointly_free_hold`, ``_models``, ``_fold``, ``_losses``.

    Raises
    ------
    InputError
        Rows and values that disagree in number, or a group (continuous c: the rows) under
        :data:`JOINT_MIN_GROUP_ROWS`.

    Notes
    -----
    Our choice: a classifier two-sample test (Lopez-Paz and Oquab 2017, "Revisiting classifier two-sample
    tests", ICLR) with scikit-learn's HistGradientBoosting (it reads interactions: a sign product, a ratio, an
    XOR) and the paired per-row loss difference against the prior as the statistic, as
    :func:`~faux_checks.method.held.uninformative_features` reads the aux model's loss.
    """
    Xb = np.asarray(X_block, dtype=np.float64)
    base = np.zeros((len(Xb), 0))
    grouped = protected_kind(kind).grouped
    c = np.asarray(c, dtype=np.int64 if grouped else np.float64)
    if not (len(Xb) == len(c) == len(base)):
        raise InputError(f"block_capacity needs as many rows as protected values; got {fmt_count(len(Xb))} rows "
                         f"and {fmt_count(len(c))} values")
    m = int(c.max()) + 1 if grouped and len(c) else 0
    smallest = int(np.bincount(c).min()) if grouped and len(c) else len(c)
    if smallest < max(JOINT_MIN_GROUP_ROWS, folds):
        raise InputError(f"the joint test of the held columns needs at least {JOINT_MIN_GROUP_ROWS} rows per protected "
                         f"group; the smallest has {fmt_count(smallest)}: audit more rows")
    fold = _folds(c, kind, folds, seed)
    sd = (float(np.std(c)) or 1.0) if kind == "continuous" else 1.0
    both = np.concatenate([base, Xb], axis=1)
    with _one_openmp_thread():
        base_pred, _ = _cross_fit(base, c, fold, kind, m, seed)
        pred, models = _cross_fit(both, c, fold, kind, m, seed)
    losses = _row_losses(pred, c, kind, sd)
    diff = _row_losses(base_pred, c, kind, sd) - losses
    se = diff.std(ddof=1) / np.sqrt(len(diff))
    z = float(diff.mean() / se) if se > 0 else 0.0
    rank_p = _rank_p_value(pred, c, fold, kind, m)
    carries = z > JOINT_Z or rank_p < JOINT_RANK_ALPHA
    return {"gain": float(diff.mean()), "z": z, "rank_p_value": rank_p, "carries": bool(carries),
            **_quality(pred, c, kind, m),
            "rows": int(len(c)), "_models": models, "_fold": fold, "_losses": losses, "_both": both, "_sd": sd}


def _rank_p_value(pred: np.ndarray, c: np.ndarray, fold: np.ndarray, kind: str, m: int) -> float:
    """One-sided p-value that a fold model ranks a group's rows above the others' (AUC > 0.5), Bonferroni over the
    folds and groups.

    Within a fold the model did not train on the rows it predicts, so under independence its predictions are
    exchangeable between the groups and the Mann–Whitney U test of each group's own predicted probability against
    the rest is exact (a continuous c: Spearman's rank correlation of prediction and c, one-sided); pooled out-of-fold
    predictions are not (each fold's model shifts all of its rows). The loss test of :func:`block_capacity` alone misses
    a block whose classifier ranks the groups apart but is over-confident (a 14% minority, an AUC of 0.66 and a loss
    no better than the prior's).
    """
    from scipy.stats import mannwhitneyu, spearmanr

    ps = []
    for k in np.unique(fold):
        rows = fold == k
        pk, ck = pred[rows], c[rows]
        if kind == "continuous":
            rho, p = spearmanr(pk, ck)
            ps.append(float(p / 2 if rho > 0 else 1 - p / 2) if np.isfinite(p) else 1.0)
            continue
        groups = [g for g in range(m) if 0 < (ck == g).sum() < len(ck)]
        if kind == "binary" or m == 2:
            groups = groups[-1:]
        ps += [float(mannwhitneyu(pk[ck == g, g], pk[ck != g, g], alternative="greater").pvalue) for g in groups]
    return float(min(1.0, min(ps) * len(ps))) if ps else 1.0


def _release_costs(test: dict, c: np.ndarray, kind: str, offset: int, held_groups: list, seed: int) -> np.ndarray:
    """Per held group: the mean per-row loss increase of the block's fold models when the group is permuted, over the
    test's rows (beyond :data:`JOINT_COST_ROWS` a seeded sample of them)."""
    rng = np.random.default_rng(seed)
    both, fold, base_losses = test["_both"], test["_fold"], test["_losses"]
    m = int(c.max()) + 1 if protected_kind(kind).grouped else 0
    costs = np.zeros(len(held_groups))
    keep: np.ndarray = np.ones(len(c), dtype=bool)
    if len(c) > JOINT_COST_ROWS:                               # a seeded sample of the rows, the same for every group
        keep[:] = False
        keep[np.random.default_rng(seed + 1).choice(len(c), JOINT_COST_ROWS, replace=False)] = True
        c, base_losses = c[keep], base_losses[keep]
    parts = [(np.flatnonzero(fold[keep] == k), model) for k, model in enumerate(test["_models"])]
    both = both[keep]
    blocks = [both[rows] for rows, _ in parts]                 # one working copy per fold: a group permuted, restored
    forests = [forest_rows(model, X) for (_, model), X in zip(parts, blocks, strict=True)]
    for j, cols in enumerate(held_groups):
        pred = np.zeros(len(c)) if kind == "continuous" else np.zeros((len(c), m))
        at = offset + np.asarray(cols)
        for (rows, model), X, forest in zip(parts, blocks, forests, strict=True):
            X[:, at] = X[rng.permutation(len(rows))[:, None], at]
            pred[rows] = _predict(model, X, kind, m) if forest is None else forest.predict(X, at, kind, m)
            X[:, at] = both[rows[:, None], at]
        costs[j] = float((_row_losses(pred, c, kind, test["_sd"]) - base_losses).mean())
    return costs


def _release(costs: np.ndarray, block_groups: list, step: dict) -> np.ndarray:
    """Pop from ``block_groups`` the group whose permutation costs the block's classifier the most (``costs``, one per
    group) and return it; ``step`` gets ``released``, ``release_cost`` and ``partners`` (the features of the groups
    left whose permutation costs at least :data:`JOINT_PARTNER_SHARE` of it)."""
    worst = int(np.argmax(costs))
    gone = block_groups.pop(worst)
    step.update(released=gone.tolist(), release_cost=float(costs[worst]),
                partners=_partner_features(block_groups, np.delete(costs, worst), float(costs[worst])))
    return gone


def _group_costs(test: dict, c: np.ndarray, kind: str, block_groups: list, seed: int) -> np.ndarray:
    """Per group of ``block_groups`` (the block's columns, in order): what permuting it costs the block's classifier."""
    positions, start = [], 0
    for g in block_groups:
        positions.append(np.arange(start, start + len(g)))
        start += len(g)
    with _one_openmp_thread():
        return _release_costs(test, c, kind, 0, positions, seed)


def _block_test(X: np.ndarray, c: np.ndarray, kind: Kind, block_groups: list, seed: int, summary: dict) -> dict | None:
    """:func:`block_capacity` of the block's columns; its figures appended to ``summary["steps"]`` and set in
    ``summary``; None (``summary`` marked untested) when the rows cannot be tested."""
    cols = np.concatenate(block_groups)
    try:
        test = block_capacity(X[:, cols], c, kind=kind, seed=seed)
    except InputError as err:
        summary.update(tested=False, free=False, reason=str(err))
        return None
    figures = {k: v for k, v in test.items() if not k.startswith("_")}
    summary.update(figures, free=not test["carries"])
    summary["steps"].append({**figures, "features": cols.tolist()})
    return test


def _release_fewest(costs: np.ndarray, X: np.ndarray, c: np.ndarray, kind: Kind, block_groups: list, seed: int,
                    summary: dict) -> list:
    """Release from ``block_groups`` the fewest of the groups ranked by ``costs`` (their permutation cost to the
    block's classifier, highest first, ties to the first group) that leave the block free; return them in rank order.

    How many is searched on the blocks they leave, smallest first: the 1, 2, 4, ... lowest-ranked groups until one
    carries c, then bisection between it and the last free one (each probe one :func:`block_capacity` fit, appended
    to ``summary["steps"]``; the test assumed monotone in what the block holds). A block that carries c in nearly
    every group costs one fit of its lowest-ranked group; one fit of a block costs about its column count.

    The last step of ``summary`` (the fit ``costs`` read) gets ``released`` (their features), ``release_cost`` (the highest cost) and ``partners``
    (the features of the groups left whose cost is over 0 and at least :data:`JOINT_PARTNER_SHARE` of a released
    group's); ``summary`` gets the figures of the free block's fit. Releasing every group leaves an empty block,
    free by definition (not fitted)."""
    order = np.argsort(-costs, kind="stable")
    step = summary["steps"][-1]
    fits: dict[int, dict] = {}
    lo, hi, size = 0, len(order), 1              # the block carries c after releasing lo groups and is free after hi
    while hi - lo > 1:
        k = max(lo + 1, len(order) - size) if size else (lo + hi) // 2
        probe = _block_test(X, c, kind, [block_groups[i] for i in np.sort(order[k:])], seed, summary)
        if probe is None or probe["carries"]:
            lo, size = k, 0                                      # bisect from here on
        else:
            hi, size = k, 2 * size if size else 0
            fits[k] = {key: v for key, v in probe.items() if not key.startswith("_")}
    gone = [block_groups[i] for i in order[:hi]]
    left = np.sort(order[hi:])
    partners = sorted({j for i in order[:hi] for j in _partner_features([block_groups[i] for i in left], costs[left],
                                                                         float(costs[i]))})
    step.update(released=[int(j) for g in gone for j in g], release_cost=float(costs[order[0]]), partners=partners)
    block_groups[:] = [block_groups[i] for i in left]
    summary.update(fits.get(hi, {}), tested=True, free=True)
    summary.pop("reason", None)
    return gone


def _partner_features(block_groups: list, costs, own: float) -> list[int]:
    """The features of the groups whose cost is over 0 and at least :data:`JOINT_PARTNER_SHARE` of ``own``."""
    return [int(j) for g, cost in zip(block_groups, list(costs), strict=True)
            if cost > 0 and cost >= JOINT_PARTNER_SHARE * own for j in g]


def _free_partners(X: np.ndarray, c: np.ndarray, kind: Kind, groups, held: np.ndarray, block_groups: list,
                   seed: int, alone_p: dict[int, float] | None = None) -> list[dict]:
    """Free numeric features (one-feature groups, not held) that tell a classifier nothing about c alone but carry
    it with the held block (a member of a pair the per-column test did not hold): ``features`` and their held
    ``partners``, for the joint move (:mod:`faux_checks.method.joint_move`). A feature whose distribution depends on
    c beyond doubt (:func:`~faux_checks.method.independence.independent_features`' chi-square p-value under
    :data:`JOINT_ALONE_P`: one contingency table, no fit) tells c alone and is not fitted; any other is fitted
    alone, then with the block (on every row: on a sample the test alone loses power first, and more features
    look joint-only). ``alone_p``: each feature's p-value of that test on these rows where already known."""
    out: list[dict] = []
    candidates = [g for g in (np.asarray(g, dtype=np.int64) for g in groups) if len(g) == 1 and not held[g].any()]
    known = alone_p or {}
    untested = [int(g[0]) for g in candidates if int(g[0]) not in known]
    if untested:                                                     # one table per feature, in one call
        tables = independent_features(X[:, untested], c, kind=kind, groups=[[i] for i in range(len(untested))])[1]
        known = {**known, **{j: t["p_value"] for j, t in zip(untested, tables, strict=True)}}
    for g in candidates:
        if known[int(g[0])] < JOINT_ALONE_P:
            continue                                                 # its distribution depends on c: readable alone
        try:
            if block_capacity(X[:, g], c, kind=kind, seed=seed)["carries"]:
                continue                                             # c is readable from it alone
            test = block_capacity(X[:, np.concatenate([*block_groups, g])], c, kind=kind, seed=seed)
        except InputError:
            continue
        if test["carries"]:
            costs = _group_costs(test, c, kind, [*block_groups, g], seed)
            partners = _partner_features(block_groups, costs[:-1], float(costs[-1]))
            if partners and costs[-1] > 0:
                out.append({"features": g.tolist(), "partners": partners})
    return out


def jointly_free_hold(X_ref, c_ref, *, kind: Kind, groups, held, declared=None, release: bool = True,
                      seed: int = 0, independence: list[dict] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """The hold with every feature group released that the held block needs to be jointly free of c.

    Parameters
    ----------
    X_ref : ndarray of shape (n, d)
        Reference rows in the aux input space.
    c_ref : ndarray of shape (n,)
        Their protected attribute.
    kind : {"binary", "multiclass", "continuous"}
    groups : sequence of index arrays
        Feature groups (a one-hot block, or one numeric feature), released whole.
    held : bool array of shape (d,)
        Features the per-column tests hold (not the declared ones).
    declared : bool array of shape (d,), optional
        Declared admissible features: held by the policy's choice, outside the block, never released.
    release : bool
        Release groups until the block is free (True), or only measure the block (False).
    seed : int
    independence : list of dict, optional
        :func:`~faux_checks.method.independence.independent_features`' table on the same rows: the partner search
        reads each one-feature group's p-value there instead of testing it again (when every row is kept).

    Returns
    -------
    held : ndarray of shape (d,), bool
        The input hold less the released groups.
    summary : dict
        ``tested`` (False: too few rows, ``reason`` says why), ``free`` (the final block tells nothing about c),
        ``features`` (the final block's feature indices), ``released`` (feature index lists,
        in release order), ``gain``, ``z``, ``metric``, ``quality``, ``n_positive``, ``n_negative``, ``rows`` of
        the final test (the first test's figures in ``steps[0]``), ``steps`` (each test's figures in the order
        fitted; a fit that released gets ``released``, the features of the group or groups it released,
        ``release_cost`` and ``partners``: the features of the groups left in the block whose permutation costs the
        classifier at least :data:`JOINT_PARTNER_SHARE` of a released group's, those that carried c with it); after a free block, ``joint_free`` (free one-feature groups that carry c only with the held block:
        ``features`` and ``partners``, :func:`_free_partners`).

    Notes
    -----
    Our reading of the rule "hold only what is jointly free of c": the first release is the most costly group (a
    pair that carries c together loses one member: the matched move reads the other's level from the one held)
    where its cost is at least :data:`JOINT_SINGLE_SHARE` of the block's gain; when the block still carries c (or
    no group costs that much), the latest fit's ranking is searched for the fewest of its top groups that leave
    the block free (:func:`_release_fewest`: one release per refit would cost one fit and one ranking per column, a
    173-column block at 20,000 rows hours). Which member of a symmetric pair is released is not identified by the
    data; ties go to the first group.
    """
    X = np.asarray(X_ref, dtype=np.float64)
    grouped = protected_kind(kind).grouped
    c = np.asarray(c_ref, dtype=np.int64 if grouped else np.float64)
    hold = np.asarray(held, dtype=bool).copy()
    dec = np.zeros(X.shape[1], dtype=bool) if declared is None else np.asarray(declared, dtype=bool)
    alone_p = {t["features"][0]: t["p_value"] for t in independence or [] if len(t["features"]) == 1}
    if len(X) > JOINT_MAX_ROWS:
        keep = np.sort(np.random.default_rng(seed).choice(len(X), JOINT_MAX_ROWS, replace=False))
        X, c, alone_p = X[keep], c[keep], {}                     # other rows: the p-values do not apply
    block_groups = [np.asarray(g, dtype=np.int64) for g in groups
                    if len(g) and hold[np.asarray(g)].all() and not dec[np.asarray(g)].any()]
    summary: dict[str, Any] = {"tested": True, "free": True, "features": [], "released": [], "steps": [],
                               "rows": int(len(c))}
    while block_groups:
        test = _block_test(X, c, kind, block_groups, seed, summary)
        if test is None or not test["carries"] or not release:
            break
        costs = _group_costs(test, c, kind, block_groups, seed)
        first = not summary["released"] and float(costs.max()) >= JOINT_SINGLE_SHARE * test["gain"]
        gone = ([_release(costs, block_groups, summary["steps"][-1])] if first
                else _release_fewest(costs, X, c, kind, block_groups, seed, summary))
        for g in gone:
            summary["released"].append(g.tolist())
            hold[g] = False
        if not first:
            break                                                # the fewest groups that free the block are out
    if release and grouped and block_groups and summary["tested"] and summary["free"]:
        summary["joint_free"] = _free_partners(X, c, kind, groups, hold | dec, block_groups, seed, alone_p)
    summary["features"] = np.concatenate(block_groups).tolist() if block_groups else []
    if not block_groups and summary["tested"]:
        summary["free"] = True                                   # nothing left held by the tests: nothing to carry c
    return hold, summary
