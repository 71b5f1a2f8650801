"""faux-checks: individual-fairness testing of tabular PyTorch models with fAux.

Castiglione, Wu, Srinivasa, Prince, "fAux: Testing Individual Fairness via Gradient
Alignment", arXiv 2210.06288 (2022). Heavy integrations (MLflow, Prefect, Great Expectations,
Evidently) are imported lazily, never at ``import faux_checks``; the library never imports the
Great Expectations suite (``expectations``), the Prefect flows (``flows``) or the command line
(``faux_checks_app``). The layout and its rules: docs/architecture.md; the maths: docs/method.md.

Examples
--------
>>> from faux_checks import FeatureSpec, check_attributes, load_policy
>>> policy = load_policy(protected="sex")                       # the shipped policy
>>> result = check_attributes(model, frame, policy=policy, feature_spec=FeatureSpec.load("spec.json"))
>>> result.decision, result.exit_code                           # ("passed", 0) / ("failed", 1) / ("undecided", 2)

In a notebook, with the model as you hold it (a fitted Pipeline on raw rows, a booster, a torch module):

>>> import faux_checks
>>> res = faux_checks.check(pipeline, df, protected="age_group")   # displays itself; res.rules, res.by_group, res.scores
>>> res.plot(); res.save_html("fairness.html")
"""

# Public names are imported on first use (PEP 562): `import faux_checks` (and so every CLI error path) does not
# pay for torch, pandas or the gate until a name is used.
_LAZY = {
    "run_audit": ".audit.drift",
    "AuditResult": ".audit.results",
    "FauxChecksError": ".errors",
    "InputError": ".errors",
    "UndecidableError": ".errors",
    "UnsafeModelError": ".errors",
    "AttributesResult": ".gate.attributes",
    "check_attributes": ".gate.attributes",
    "Policy": ".gate.policy_schema",
    "load_policy": ".gate.policy",
    "CheckResult": ".gate.result",
    "StreamResult": ".gate.stream.outcome",
    "StreamSummary": ".gate.stream.summary",
    "score_stream": ".gate.stream.run",
    "ProtectedAttribute": ".inputs.protected",
    "encode_protected": ".inputs.protected",
    "from_column_transformer": ".inputs.column_transformer",
    "FeatureSpec": ".inputs.tabular",
    "AuxiliaryModel": ".method.auxiliary",
    "FAuxTester": ".method.faux",
    "LICResult": ".method.result",
    "LICScores": ".method.lic",
    "faux_ng_scores": ".method.lic",
    "faux_projection_scores": ".method.lic",
    "faux_scores": ".method.lic",
    "lic_upper_bound": ".method.lic",
    "TargetOutput": ".method.output",
    "as_target": ".inputs.estimators",          
    "ForwardOnlyTarget": ".method.forward",
    "FairnessCheck": ".notebook",
    "check": ".notebook",
}


def __getattr__(name: str):
    """The public name ``name``, imported from its module on first use (then cached in the package)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'faux_checks' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
    "StreamResult",
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
    "score_stream",
]
