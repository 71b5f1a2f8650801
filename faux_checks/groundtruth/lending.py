"""A lending file of ordinary size with an exact counterfactual: ground truth at the sizes lending teams audit.

Mortgage-decision files a model-risk team gates are small (a few thousand applications), the protected group is a
minority (10–15%), the label is a yes/no **adverse** event (``deny``), some values are missing and the protected
attribute reaches a model only through proxies of where an applicant lives. This generator builds such a file,
every draw seeded, with each applicant's true individual-fairness score computable for any target model.

Generative model (our construction; no code or data of the paper or of an outside benchmark):

- ``race``: ``"minority"`` with probability ``minority_share``, else ``"majority"``; c = 1 for the minority.
- legitimate block, drawn independently of c (z⊥ of Definition 1 of arXiv 2210.06288):
  ``income`` (thousands, log-normal), ``loan_amount`` (thousands, a multiple of income), ``debt_to_income``
  (percent), ``credit_score`` (300–850), ``loan_term`` (months: 180 or 360), ``employment_years`` (years; missing
  for ``missing_share`` of applicants, completely at random, as an unanswered form field).
- proxies c causes, with stored noise ε: ``tract_minority_share`` = Φ(−1.2 + ``strength``·(2c − 1) + 0.6·ε₁)
  (the census tract's minority share, in [0, 1]), ``tract_median_income`` = 70 · exp(−0.12·``strength``·(2c − 1)
  + 0.25·ε₂) (thousands).
- the adverse label: ``deny`` = ``"yes"`` with P = σ(−2.2 + 0.045·(DTI − 36) − 0.012·(score − 700) + 0.9·1[LTI > 4]
  + 0.15·(1 − employment_years/10, 0 when missing)); with ``label_bias`` b, each minority applicant recorded
  ``"no"`` is recorded ``"yes"`` with probability b (historical denials harsher for the protected group).

The counterfactual of an applicant (:meth:`LendingData.counterfactual`) flips c and regenerates the two proxies
from the same ε, every other column fixed; IFS(x) = |P(deny | x(c)) − P(deny | x(c′))| for a target model
(:func:`lending_fairness_scores`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from scipy.special import expit, ndtr

from ..errors import InputError

__all__ = ["LENDING_FEATURES", "LENDING_PROXIES", "LendingData", "lending_fairness_scores", "make_lending_data"]

#: The legitimate block (not caused by the protected attribute).
LENDING_FEATURES: tuple[str, ...] = ("income", "loan_amount", "debt_to_income", "credit_score", "loan_term",
                                     "employment_years")
#: The columns the protected attribute causes (where an applicant lives).
LENDING_PROXIES: tuple[str, ...] = ("tract_minority_share", "tract_median_income")


@dataclass(frozen=True)
class LendingData:
    """A generated lending file and what its counterfactual needs.

    Attributes
    ----------
    frame : DataFrame of shape (n, 10)
        ``race`` (``"minority"``/``"majority"``), :data:`LENDING_FEATURES`, :data:`LENDING_PROXIES` and ``deny``
        (``"yes"``/``"no"``, the recorded adverse label); ``employment_years`` holds NaN where missing.
    c : ndarray of shape (n,)
        1 for the minority, 0 for the majority.
    noise : ndarray of shape (n, 2)
        ε₁, ε₂ of the two proxies (standard normal).
    strength : float
        How strongly c shows in the proxies.
    deny_true : ndarray of shape (n,)
        The unbiased adverse label (1 = deny) before the historical bias.
    """

    frame: pd.DataFrame
    c: np.ndarray
    noise: np.ndarray
    strength: float
    deny_true: np.ndarray

    def counterfactual(self) -> pd.DataFrame:
        """The same applicants with the protected attribute flipped and the proxies regenerated from the same noise.

        Returns
        -------
        DataFrame of shape (n, 10)
            ``race`` and :data:`LENDING_PROXIES` changed; every other column (label included) as in :attr:`frame`.
        """
        flipped: np.ndarray = 1 - np.asarray(self.c)
        out = self.frame.copy()
        out["race"] = np.where(flipped == 1, "minority", "majority")
        share, median = _proxies(flipped, self.noise, self.strength)
        out["tract_minority_share"] = share
        out["tract_median_income"] = median
        return out


def _proxies(c: np.ndarray, noise: np.ndarray, strength: float) -> tuple[np.ndarray, np.ndarray]:
    """(tract_minority_share, tract_median_income), each (n,), from c (n,) and noise (n, 2)."""
    e = 2.0 * np.asarray(c, dtype=np.float64) - 1.0
    share = ndtr(-1.2 + strength * e + 0.6 * noise[:, 0])
    median = 70.0 * np.exp(-0.12 * strength * e + 0.25 * noise[:, 1])
    return np.round(share, 4), np.round(median, 2)


def make_lending_data(n: int = 2400, *, minority_share: float = 0.14, label_bias: float = 0.0,
                      strength: float = 1.0, missing_share: float = 0.01, seed: int = 0) -> LendingData:
    """Generate a lending file (module docstring) of ``n`` applications.

    Parameters
    ----------
    n : int
        Applications (rows), at least 50.
    minority_share : float
        Probability that an applicant belongs to the protected group, in (0, 1).
    label_bias : float
        Share of the minority's recorded "no" turned into "yes" (historical bias), in [0, 1].
    strength : float
        Proxy strength (≥ 0): 1.0 gives an auxiliary-model ROC-AUC of about 0.85 for c from the proxies.
    missing_share : float
        Share of ``employment_years`` left missing, in [0, 1).
    seed : int

    Returns
    -------
    LendingData

    Raises
    ------
    InputError
        A parameter out of its range.
    """
    if n < 50 or not 0 < minority_share < 1 or not 0 <= label_bias <= 1 or strength < 0 or not 0 <= missing_share < 1:
        raise InputError(f"make_lending_data: n={n} (>= 50), minority_share={minority_share} (0-1), label_bias="
                         f"{label_bias} (0-1), strength={strength} (>= 0), missing_share={missing_share} (0-1)")
    rng = np.random.default_rng(seed)
    c = (rng.random(n) < minority_share).astype(np.int64)
    income = np.round(np.exp(rng.normal(np.log(75.0), 0.45, n)), 1)
    loan = np.round(income * rng.uniform(1.5, 5.5, n), 1)
    dti = np.round(np.clip(rng.normal(36.0, 9.0, n), 5.0, 65.0), 1)
    score = np.round(np.clip(rng.normal(705.0, 55.0, n), 300.0, 850.0))
    term = np.where(rng.random(n) < 0.8, 360.0, 180.0)
    employment = np.round(rng.gamma(2.0, 3.0, n), 1)
    missing = rng.random(n) < missing_share
    noise = rng.standard_normal((n, 2))
    share, median = _proxies(c, noise, strength)
    emp_term = np.where(missing, 0.0, 1.0 - np.minimum(employment, 10.0) / 10.0)
    logit = (-2.2 + 0.045 * (dti - 36.0) - 0.012 * (score - 700.0) + 0.9 * (loan / income > 4.0) + 0.15 * emp_term)
    deny_true = (rng.random(n) < expit(logit)).astype(np.int64)
    flip = (c == 1) & (deny_true == 0) & (rng.random(n) < label_bias)
    deny = np.where(flip, 1, deny_true)
    frame = pd.DataFrame({
        "race": np.where(c == 1, "minority", "majority"), "income": income, "loan_amount": loan,
        "debt_to_income": dti, "credit_score": score, "loan_term": term,
        "employment_years": np.where(missing, np.nan, employment), "tract_minority_share": share,
        "tract_median_income": median, "deny": np.where(deny == 1, "yes", "no"),
    })
    return LendingData(frame=frame, c=c, noise=noise, strength=float(strength), deny_true=deny_true)


def lending_fairness_scores(data: LendingData, predict_deny: Callable[[pd.DataFrame], np.ndarray]) -> np.ndarray:
    """Each applicant's true individual-fairness score: |P(deny | x(c)) − P(deny | x(c′))|.

    Parameters
    ----------
    data : LendingData
    predict_deny : callable
        Raw rows (a frame like :attr:`LendingData.frame`) -> P(deny = yes) of shape (n,), in [0, 1].

    Returns
    -------
    ndarray of shape (n,)
        In probability points (0–1).

    Raises
    ------
    InputError
        ``predict_deny`` returned another shape or values outside [0, 1].
    """
    n = len(data.frame)
    p = np.asarray(predict_deny(data.frame), dtype=np.float64)
    q = np.asarray(predict_deny(data.counterfactual()), dtype=np.float64)
    if p.shape != (n,) or q.shape != (n,) or not (np.all((p >= 0) & (p <= 1)) and np.all((q >= 0) & (q <= 1))):
        raise InputError(f"lending_fairness_scores: predict_deny must return {n} probabilities in [0, 1]; got shapes "
                         f"{p.shape} and {q.shape}")
    return np.abs(p - q)
