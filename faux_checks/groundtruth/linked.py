"""Ground truth for a protected attribute held in a linked file with some persons' keys missing.

The rows keep their exact c and their exact per-person truth (from any generator with a known counterfactual, e.g.
:mod:`faux_checks.groundtruth.proxy` on real Adult rows, where each person's true score |f(x′) − f(x)| is
computed on the regenerated counterfactual row); the tool is given instead the audit rows with a person key and no
c, and a separate protected file (the key and c) from which a share u of the keys is missing.

Missingness (our construction; all draws seeded). Exactly k = round(u·n) keys are missing. A pattern names a
*targeted* set T of rows and a tilt t ∈ [0, 1]: min(round(t·k), |T|) of the missing keys are drawn uniformly from T,
the rest uniformly from the other rows (if these are too few, the remainder from T again). Patterns:

- ``"random"``: no targeted set; missing completely at random.
- ``"protected"``: T = {c = 1}, t = 0.8: keys go missing more often in the protected group, so the matched rows
  under-represent it (the unmatched share of group 1 is min(round(0.8·k), |T|)/|T|).
- ``"flagged"``: T = the truly flagged people (true score > δ), t = 1: the adversarial case, every missing key
  taken from the people the check should count first, so the matched rows' flagged fraction reads low and the
  all-rows fraction sits at the upper end of the bound [l(1 − u), h(1 − u) + u]
  (:func:`faux_checks.gate.unmatched.flagged_bound`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InputError

__all__ = ["MISSINGNESS_PATTERNS", "linked_files", "missing_keys"]

MISSINGNESS_PATTERNS: dict[str, float] = {"random": 0.0, "protected": 0.8, "flagged": 1.0}
"""Pattern -> its tilt t (the share of missing keys drawn from the targeted set first)."""


def missing_keys(n: int, share: float, *, seed: int, targeted: np.ndarray | None = None,
                 tilt: float = 0.0) -> np.ndarray:
    """Which of n persons' keys are missing from the protected file (module docstring).

    Parameters
    ----------
    n : int
        Audit rows, ≥ 1.
    share : float
        u in [0, 1): exactly ``round(u·n)`` keys are missing.
    seed : int
        Seeds the uniform draws.
    targeted : ndarray of bool, shape (n,), optional
        The targeted set T (None: missing completely at random).
    tilt : float
        t in [0, 1]: ``min(round(t·k), |T|)`` missing keys come from T.

    Returns
    -------
    ndarray of bool, shape (n,)
        True where the key is missing; ``round(u·n)`` of them.

    Raises
    ------
    InputError
        ``share`` outside [0, 1), ``tilt`` outside [0, 1], or ``targeted`` not of shape (n,).
    """
    if not 0.0 <= float(share) < 1.0 or not 0.0 <= float(tilt) <= 1.0:
        raise InputError(f"the missing share must lie in [0, 1) and the tilt in [0, 1]; got {share} and {tilt}")
    k = int(round(float(share) * n))
    t = np.zeros(n, dtype=bool) if targeted is None else np.asarray(targeted, dtype=bool)
    if t.shape != (n,):
        raise InputError(f"the targeted set has shape {t.shape}; it needs one entry per row, shape ({n},)")
    rng = np.random.default_rng(seed)
    inside, outside = np.flatnonzero(t), np.flatnonzero(~t)
    k_in = min(int(round(float(tilt) * k)), len(inside))
    k_in += max(0, k - k_in - len(outside))          # too few rows outside T: the remainder from T
    out: np.ndarray = np.zeros(n, dtype=bool)
    out[rng.choice(inside, k_in, replace=False)] = True
    out[rng.choice(outside, k - k_in, replace=False)] = True
    return out


def linked_files(frame: pd.DataFrame, column: str, share: float, pattern: str, *, seed: int,
                 truth: np.ndarray | None = None, delta: float = 0.1,
                 key: str = "pid") -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """The audit rows and the linked protected file as the tool gets them, with ``share`` of the keys missing.

    Parameters
    ----------
    frame : DataFrame of shape (n, any)
        With the exact protected column ``column`` (0/1 for the ``"protected"`` pattern).
    column : str
        The protected column; moved to the protected file.
    share : float
        u, the share of keys missing from the protected file.
    pattern : {"random", "protected", "flagged"}
        :data:`MISSINGNESS_PATTERNS` (module docstring).
    seed : int
        Seeds which keys go missing and the protected file's row order.
    truth : ndarray of shape (n,), optional
        Each person's true score, in the target's unit; needed by ``"flagged"`` (T = truth > ``delta``).
    delta : float
        δ, in the unit of ``truth``.
    key : str
        The person key's column name (values 0 .. n − 1).

    Returns
    -------
    audit : DataFrame of shape (n, any)
        ``frame`` without ``column``, with ``key`` first.
    protected : DataFrame of shape (n − round(u·n), 2)
        ``key`` and ``column`` of the persons whose key is kept, shuffled.
    missing : ndarray of bool, shape (n,)
        True where the person's key is missing from ``protected``.

    Raises
    ------
    InputError
        An unknown pattern, ``"flagged"`` without ``truth``, ``"protected"`` with a c not 0/1, or
        :func:`missing_keys`'s.
    """
    if pattern not in MISSINGNESS_PATTERNS:
        raise InputError(f"unknown missingness pattern {pattern!r}; one of {sorted(MISSINGNESS_PATTERNS)}")
    c = frame[column].to_numpy()
    targeted = None
    if pattern == "protected":
        if not np.isin(c, (0, 1)).all():
            raise InputError(f"the 'protected' pattern needs '{column}' 0/1 (1: the protected group)")
        targeted = c == 1
    elif pattern == "flagged":
        if truth is None:
            raise InputError("the 'flagged' pattern needs each person's true score (truth=)")
        targeted = np.asarray(truth, dtype=np.float64) > delta
    missing = missing_keys(len(frame), share, seed=seed, targeted=targeted, tilt=MISSINGNESS_PATTERNS[pattern])
    ids = np.arange(len(frame))
    audit = frame.drop(columns=[column]).reset_index(drop=True)
    audit.insert(0, key, ids)
    protected = pd.DataFrame({key: ids[~missing], column: c[~missing]})
    protected = protected.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    return audit, protected, missing
