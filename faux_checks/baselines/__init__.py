"""Baseline testers the gate runs next to fAux (docs/method.md, "Baselines").

Each tester is one class holding the models and settings, with ``score(X) -> (n,)`` for
per-individual testers (docs/architecture.md, "How code reads"). Group metrics are model-level
and return a scalar.
Capability flags: ``needs_protected_input`` (c's columns must be target inputs: FTU flip) and
``needs_protected_values`` (``score(X, c)`` needs each scored row's group: FlipTest); the
weighted FTA and Unfair Map testers learn their sensitive subspace once with ``fit(X, c)``.
"""

from .fliptest import FlipTestTester
from .fta import FTATester
from .ftu import FTUFlipTester
from .group_metrics import group_metrics
from .linked_columns import LinkedColumnsTester, check_links, linked_counterfactual
from .subspace import fit_sensitive_subspace
from .unfair_map import UnfairMapTester
from .weighted_fta import WeightedFTATester

__all__ = [
    "FTATester",
    "FTUFlipTester",
    "FlipTestTester",
    "LinkedColumnsTester",
    "UnfairMapTester",
    "WeightedFTATester",
    "check_links",
    "fit_sensitive_subspace",
    "group_metrics",
    "linked_counterfactual",
]
