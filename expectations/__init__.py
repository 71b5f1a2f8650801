"""Great Expectations 1.x integration of faux-checks: one expectation per tester and the gate suite.

Importing this package registers the custom expectations and metrics with GX (a suite stored
as JSON can only be loaded in a process that has imported them: use :func:`load_suite`).
The library (``faux_checks``) never imports this package.
"""

from .baseline_metrics import (
    DemographicParityDifference,
    EqualizedOddsDifference,
    FlipTestFlaggedFraction,
    FtaFlaggedFraction,
    FtuFlipFlaggedFraction,
    UnfairMapFlaggedFraction,
    WeightedFtaFlaggedFraction,
)
from .baselines import (
    ExpectDemographicParityDifferenceToBeAtMost,
    ExpectEqualizedOddsDifferenceToBeAtMost,
    ExpectFlipTestFlaggedFractionToBeAtMost,
    ExpectFtaFlaggedFractionToBeAtMost,
    ExpectFtuFlipFlaggedFractionToBeAtMost,
    ExpectLinkedColumnsFlaggedFractionToBeAtMost,
    ExpectUnfairMapFlaggedFractionToBeAtMost,
    ExpectWeightedFtaFlaggedFractionToBeAtMost,
)
from ._inputs import trusting
from .faux import ExpectFauxFlaggedFractionToBeAtMost, FauxCheck
from .suite import SuiteOutcome, build_suite, load_suite, save_suite, validate_frame
from .testers import tester_expectation

__all__ = [
    "DemographicParityDifference",
    "EqualizedOddsDifference",
    "ExpectDemographicParityDifferenceToBeAtMost",
    "ExpectEqualizedOddsDifferenceToBeAtMost",
    "ExpectFauxFlaggedFractionToBeAtMost",
    "ExpectFlipTestFlaggedFractionToBeAtMost",
    "ExpectFtaFlaggedFractionToBeAtMost",
    "ExpectFtuFlipFlaggedFractionToBeAtMost",
    "ExpectLinkedColumnsFlaggedFractionToBeAtMost",
    "ExpectUnfairMapFlaggedFractionToBeAtMost",
    "ExpectWeightedFtaFlaggedFractionToBeAtMost",
    "FauxCheck",
    "FlipTestFlaggedFraction",
    "FtaFlaggedFraction",
    "FtuFlipFlaggedFraction",
    "UnfairMapFlaggedFraction",
    "WeightedFtaFlaggedFraction",
    "SuiteOutcome",
    "build_suite",
    "load_suite",
    "save_suite",
    "tester_expectation",
    "trusting",
    "validate_frame",
]
