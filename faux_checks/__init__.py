"""faux-checks: individual-fairness testing of tabular PyTorch models with fAux.

Castiglione, Wu, Srinivasa, Prince, "fAux: Testing Individual Fairness via Gradient
Alignment", arXiv 2210.06288 (2022). Heavy integrations (MLflow, Prefect, Great Expectations,
Evidently) are imported lazily, never at ``import faux_checks``.
"""

from .errors import FauxChecksError, InputError, UndecidableError, UnsafeModelError
from .gate.stream.run import StreamSummary, score_stream
from .inputs.protected import ProtectedAttribute, encode_protected
from .inputs.tabular import FeatureSpec
from .method.auxiliary import AuxiliaryModel
from .method.faux import FAuxTester, LICResult
from .method.lic import LICScores, faux_ng_scores, faux_projection_scores, faux_scores, lic_upper_bound
from .method.output import TargetOutput

__version__ = "0.1.0"

__all__ = [
    "AuxiliaryModel",
    "FAuxTester",
    "FauxChecksError",
    "FeatureSpec",
    "InputError",
    "LICResult",
    "LICScores",
    "ProtectedAttribute",
    "StreamSummary",
    "TargetOutput",
    "UndecidableError",
    "UnsafeModelError",
    "encode_protected",
    "faux_ng_scores",
    "faux_projection_scores",
    "faux_scores",
    "lic_upper_bound",
    "score_stream",
]
