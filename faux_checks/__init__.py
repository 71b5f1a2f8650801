"""faux-checks: individual-fairness testing of tabular PyTorch models with fAux.

Castiglione, Wu, Srinivasa, Prince, "fAux: Testing Individual Fairness via Gradient
Alignment", arXiv 2210.06288 (2022). Heavy integrations (MLflow, Prefect, Great Expectations,
Evidently) are imported lazily, never at ``import faux_checks``; the library never imports the
Great Expectations suite (``expectations``), the Prefect flows (``flows``) or the command line
(``faux_checks_app``). The layout and its rules: docs/architecture.md; the maths: docs/method.md.

Examples
--------
>>> from faux_checks import FeatureSpec, load_policy, run_check
>>> policy = load_policy(protected="sex")                       # the shipped policy
>>> result = run_check(model, frame, policy=policy, feature_spec=FeatureSpec.load("spec.json"))
>>> result.decision, result.exit_code                           # ("passed", 0) / ("failed", 1) / ("undecided", 2)

In a notebook, with the model as you hold it (a fitted Pipeline on raw rows, a booster, a torch module):

>>> import faux_checks
>>> res = faux_checks.check(pipeline, df, protected="age_group")   # displays itself; res.rules, res.by_group, res.scores
>>> res.plot(); res.save_html("fairness.html")
"""

from .audit.drift import run_audit
from .audit.results import AuditResult
from .errors import FauxChecksError, InputError, UndecidableError, UnsafeModelError
from .gate.attributes import AttributesResult, check_attributes
from .gate.check import run_check
from .gate.policy import Policy, load_policy
from .gate.result import CheckResult
from .gate.stream.run import StreamSummary, score_stream
from .inputs.protected import ProtectedAttribute, encode_protected
from .inputs.column_transformer import from_column_transformer
from .inputs.estimators import as_target
from .inputs.tabular import FeatureSpec
from .method.auxiliary import AuxiliaryModel
from .method.faux import FAuxTester, LICResult
from .method.forward import ForwardOnlyTarget
from .method.lic import LICScores, faux_ng_scores, faux_projection_scores, faux_scores, lic_upper_bound
from .method.output import TargetOutput
from .notebook import FairnessCheck, check

__version__ = "0.1.0"

__all__ = [
    "AttributesResult",
    "AuditResult",
    "AuxiliaryModel",
    "CheckResult",
    "FAuxTester",
    "FauxChecksError",
    "FairnessCheck",
    "FeatureSpec",
    "ForwardOnlyTarget",
    "from_column_transformer",
    "InputError",
    "LICResult",
    "LICScores",
    "Policy",
    "ProtectedAttribute",
    "StreamSummary",
    "TargetOutput",
    "UndecidableError",
    "UnsafeModelError",
    "as_target",
    "check",
    "check_attributes",
    "encode_protected",
    "faux_ng_scores",
    "faux_projection_scores",
    "faux_scores",
    "lic_upper_bound",
    "load_policy",
    "run_audit",
    "run_check",
    "score_stream",
]
