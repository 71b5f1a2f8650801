"""The fAux maths: gradients, the output form, the LIC readings, the auxiliary model, the tester.

- ``_batching``: chunking, eval mode and tensors shared by every module here.
- ``gradients``: per-individual gradients of P(y | x) and Jacobians of the auxiliary model.
- ``lic``: the LIC readings as pure functions on tensors (eq. 9, NG, projection, LIC-UB).
- ``auxiliary``: the auxiliary model f_aux that predicts the protected attribute from x.
- ``swap``: the default (swap) reading's reference and move; its parts ``metric``, ``shifts``, ``matching``, ``held``,
  ``quantiles``, ``torch_path``; ``counterfactual``, ``goals`` and ``chunk``: one chunk of individuals through it.
- ``faux``: :class:`~faux_checks.method.faux.FAuxTester`, which streams individuals through them
  (``result``: its :class:`~faux_checks.method.result.LICResult`; ``ranking``: the per-person order it gives;
  ``batch_probe``: the models' batch probe).

New maths goes here, tested against closed forms (docs/method.md says what each reading means).
"""
