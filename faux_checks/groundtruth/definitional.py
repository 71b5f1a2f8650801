"""The definitional counterfactual on UCI Adult: a partial ground truth on real data.

Changing only sex, an individual whose ``relationship`` is ``Husband`` becomes ``Wife`` and vice
versa: these two values name the sex of a married person by definition. Everything else stays
fixed. The change of a target's prediction under this counterfactual is exact on married rows
for the part of sex's influence that runs through the definition, and a lower bound everywhere
(other features may depend on sex in ways no one can write down). Unmarried rows of a model that
does not take sex as an input score exactly 0.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from .._validation import require_columns
from ..baselines.linked_columns import linked_counterfactual

__all__ = ["ADULT_LINKS", "definitional_counterfactual", "definitional_fairness_scores", "linked_rows"]

#: The values of Adult's ``relationship`` that name the sex of a married person.
ADULT_LINKS = {"relationship": {"Male": "Husband", "Female": "Wife"}}


def definitional_counterfactual(frame: pd.DataFrame, *, protected: str = "sex", links=ADULT_LINKS) -> pd.DataFrame:
    """The rows with the binary protected attribute flipped and the linked values mapped; not modified.

    Raises
    ------
    InputError
        A missing column (named, with what is present), or a protected attribute without exactly the
        two groups the links name.
    """
    require_columns(frame, [protected, *links], what="definitional counterfactual")
    groups = sorted({g for mapping in links.values() for g in mapping})
    values = frame[protected].astype(str).to_numpy()
    if len(groups) != 2 or not np.isin(values, groups).all():
        from ..errors import InputError

        raise InputError(f"the definitional counterfactual flips a binary protected attribute between {groups}; "
                         f"'{protected}' holds {sorted(set(values))[:10]}")
    other = np.where(values == groups[0], groups[1], groups[0])
    return linked_counterfactual(frame, protected=protected, groups=values, to_groups=other, links=links)


def linked_rows(frame: pd.DataFrame, *, links=ADULT_LINKS) -> np.ndarray:
    """Bool (n,): rows holding a linked value (Adult: married rows), where the truth is exact."""
    mask: np.ndarray = np.zeros(len(frame), dtype=bool)
    for column, mapping in links.items():
        mask |= frame[column].astype(str).isin([str(v) for v in mapping.values()]).to_numpy()
    return mask


def definitional_fairness_scores(predict: Callable[[pd.DataFrame], np.ndarray], frame: pd.DataFrame, *,
                                 protected: str = "sex", links=ADULT_LINKS) -> np.ndarray:
    """|f(x) − f(x′)| under :func:`definitional_counterfactual`; (n,), probability points."""
    p = np.asarray(predict(frame), dtype=np.float64)
    return np.abs(np.asarray(predict(definitional_counterfactual(frame, protected=protected, links=links)),
                             dtype=np.float64) - p)
