"""Baseline testers the gate runs next to fAux (METHOD.md, "Baselines").

Each tester is one class holding the models and settings, with ``score(X) -> (n,)`` for
per-individual testers (STYLE.md §3). Group metrics are model-level and return a scalar.
"""

from .fta import FTATester
from .group_metrics import group_metrics

__all__ = ["FTATester", "group_metrics"]
