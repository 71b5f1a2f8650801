"""What comes in: data files, the feature encoding, the protected attribute, model files.

- ``tabular``: :class:`~faux_checks.inputs.tabular.FeatureSpec` (DataFrame -> encoded X, and
  evidence back to source columns).
- ``protected``: the protected attribute codec (binary, multi-class or continuous groups).
- ``io``: reading audit data, writing per-row scores.
- ``models``: loading target and auxiliary models without unpickling arbitrary objects.
- ``datasets``: the bundled UCI Adult data (``data/``).
"""
