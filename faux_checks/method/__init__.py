"""The fAux maths: gradients, the output form, the LIC readings, the auxiliary model, the tester.

- ``_batching``: chunking, eval mode and tensors shared by every module here.
- ``gradients``: per-individual gradients of P(y | x) and Jacobians of the auxiliary model.
- ``lic``: the LIC readings as pure functions on tensors (eq. 9, NG, projection, LIC-UB).
- ``auxiliary``: the auxiliary model f_aux that predicts the protected attribute from x.
- ``faux``: :class:`~faux_checks.method.faux.FAuxTester`, which streams individuals through them.

New maths goes here, tested against closed forms (docs/method.md says what each reading means).
"""
