"""Per-individual input gradients and Jacobians, batched, in bounded memory.

Notation (docs/method.md): g = ∇ₓ f_tar(x) of shape (n, d); J = ∂f_aux/∂x of shape (n, k, d).

All functions here

- put the model in eval mode for the call and restore every submodule's previous mode after it
  (a model saved in train mode with dropout/BatchNorm gives deterministic, batch-independent
  gradients: bad-inputs case C06), and never modify the model's parameters;
- use the batch-sum trick (rows are independent in eval mode, so the gradient of the sum of the
  outputs is the stack of per-row gradients): one backward pass per output, no Python loop
  over individuals;
- take X in chunks of ``chunk_size`` rows, so memory is bounded by the chunk, not n.

The target model's output form is declared (:class:`~faux_checks.method.output.TargetOutput`)
and the gradient is always that of P(y = target_class | x), as in the paper. For a logit output
the probability's gradient is formed by the chain rule σ'(z)·∇z with σ'(z) computed in float64,
so a saturated float32 probability does not zero the gradient (docs/method.md, Adult evidence:
244 rows had g = 0 exactly). For probability outputs the model is differentiated in a float64
copy for the same reason.
"""

from __future__ import annotations

import warnings
from typing import Callable

import torch

from .._validation import fmt_count
from ..errors import InputError
from ._batching import DEFAULT_CHUNK, eval_mode, iter_chunks
from .output import TargetOutput, float64_copy, log_odds, probability, raw_output

__all__ = [
    "check_batch_independence",
    "output_jacobian",
    "path_averaged_gradients",
    "target_probability_and_gradient",
]


def target_probability_and_gradient(
    model,
    X: torch.Tensor,
    output: TargetOutput,
    *,
    chunk_size: int = DEFAULT_CHUNK,
    _twin=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """P(y = target_class | x) and its input gradient for every row.

    Parameters
    ----------
    model : torch.nn.Module or TorchScript module
        The target model; put in eval mode for the call, mode restored afterwards.
    X : Tensor of shape (n, d), float32
    output : TargetOutput
        A resolved form (see :func:`~faux_checks.method.output.resolve_output_form`).

    Returns
    -------
    prob : Tensor of shape (n,), float64
    grad : Tensor of shape (n, d), float64
        ∇ₓ P(y = target_class | x), in probability per unit of each encoded feature (kept in
        float64: σ'(z) for |z| > ~87 is below float32's normal range and would round to 0).

    Notes
    -----
    Batch-sum trick; the form ``"value"`` returns the output itself and its gradient (in its unit); logit forms use σ'(z) = σ(z)σ(−z) in float64, probability forms a float64
    copy of the model (see module docstring).
    """
    if output.form == "auto":
        raise InputError("resolve the output form first (resolve_output_form)")
    n = X.shape[0]
    probs = torch.empty(n, dtype=torch.float64, device=X.device)
    grads = torch.empty(X.shape, dtype=torch.float64, device=X.device)
    use_twin = output.form in ("probability", "softmax")
    net = (_twin if _twin is not None else float64_copy(model)) if use_twin else model
    with eval_mode(net):
        for sl in iter_chunks(n, chunk_size):
            p, g = _target_chunk(net, X[sl], output)
            probs[sl] = p
            grads[sl] = g
    return probs, grads


def _input_grad(y: torch.Tensor, x: torch.Tensor, *, retain_graph: bool = False) -> torch.Tensor:
    """∂y/∂x; exactly zero when y does not depend on x (a constant output is flat, not an error)."""
    if not y.requires_grad:
        return torch.zeros_like(x)
    (g,) = torch.autograd.grad(y, x, retain_graph=retain_graph, allow_unused=True)
    return torch.zeros_like(x) if g is None else g


def _target_chunk(net, x: torch.Tensor, output: TargetOutput) -> tuple[torch.Tensor, torch.Tensor]:
    if output.form == "value":                                      # a regression output: read and differentiated as is
        x = x.float().requires_grad_(True)
        v = raw_output(net, x)[:, 0]                                # (b,) in the output's unit
        return v.detach().double(), _input_grad(v.sum(), x).double()
    if output.form in ("probability", "softmax"):
        x = x.double().requires_grad_(True)
        p = probability(raw_output(net, x), output)                     # (b,) float64
        g = _input_grad(p.sum(), x)
        return p.detach(), g
    x = x.float().requires_grad_(True)
    z = log_odds(raw_output(net, x), output)                         # (b,) log-odds of the tested class
    gz = _input_grad(z.sum(), x)                                     # (b, d)
    z64 = z.detach().double()
    p = torch.sigmoid(z64)
    dp_dz = torch.sigmoid(z64) * torch.sigmoid(-z64)                # σ'(z) in float64: no saturation to 0
    return p, gz.double() * dp_dz[:, None]


def output_jacobian(
    fn: Callable[[torch.Tensor], torch.Tensor],
    X: torch.Tensor,
    *,
    chunk_size: int = DEFAULT_CHUNK,
) -> torch.Tensor:
    """Per-row Jacobian of a function with k outputs.

    Parameters
    ----------
    fn : callable, Tensor (b, d) -> Tensor (b, k)
        Rows must be independent (a model in eval mode).
    X : Tensor of shape (n, d)

    Returns
    -------
    Tensor of shape (n, k, d), float32
        ``J[i, j, :] = ∂ fn(X)[i, j] / ∂ X[i, :]`` (k backward passes per chunk).
    """
    n = X.shape[0]
    J = None
    for sl in iter_chunks(n, chunk_size):
        x = X[sl].float().requires_grad_(True)
        out = fn(x)
        if out.ndim == 1:
            out = out[:, None]
        k = out.shape[1]
        if J is None:
            J = torch.empty((n, k, X.shape[1]), dtype=torch.float32)
        for j in range(k):
            gj = _input_grad(out[:, j].sum(), x, retain_graph=j < k - 1)
            J[sl, j] = gj
    if J is None:
        J = torch.empty((0, 0, X.shape[1]))
    return J


def path_averaged_gradients(
    fn: Callable[[torch.Tensor], torch.Tensor],
    X: torch.Tensor,
    *,
    n_outputs: int,
    baseline: torch.Tensor,
    n_steps: int = 32,
    chunk_size: int = 8_192,
) -> torch.Tensor:
    """Integrated gradients without the (x − x') factor: the mean gradient along the path.

    Uses captum's ``IntegratedGradients(multiply_by_inputs=False)`` (Sundararajan et al. 2017),
    so for a linear function the result equals its gradient exactly.

    Parameters
    ----------
    fn : callable, Tensor (b, d) -> Tensor (b, k)
    X : Tensor of shape (n, d)
    n_outputs : int
        k.
    baseline : Tensor of shape (d,)
        Path start x' (docs/method.md, open point 4).
    n_steps : int
        Gauss-Legendre steps.

    Returns
    -------
    Tensor of shape (n, k, d), float32
    """
    from captum.attr import IntegratedGradients

    def forward(x):
        out = fn(x)
        return out[:, None] if out.ndim == 1 else out

    ig = IntegratedGradients(forward, multiply_by_inputs=False)
    n, d = X.shape
    out = torch.empty((n, n_outputs, d), dtype=torch.float32)
    for sl in iter_chunks(n, chunk_size):
        x = X[sl].float()
        base = baseline.float().expand_as(x)
        for j in range(n_outputs):
            out[sl, j] = ig.attribute(x, baselines=base, target=j, n_steps=n_steps).detach().float()
    return out


PROBE_RTOL_FLOAT64 = 1e-6
"""Tolerance of the batch-independence probe in float64, relative to the largest probe output."""
PROBE_RTOL_FLOAT32 = 1e-3
"""Tolerance when the model cannot run in float64 (float32 kernels differ by batch size by ~1e-7 of
the intermediate values, which can be 1,000× the output: a logit of 1.2e-3 read 1.2077e-3 in a
batch and 1.2063e-3 alone on Adult)."""


def check_batch_independence(fn: Callable[..., torch.Tensor], X: torch.Tensor, *, n_rows: int = 8,
                             model: str = "model", module=None) -> float:
    """Raise InputError if a row's output depends on the other rows of its batch.

    Compares the outputs of the first ``n_rows`` rows computed as one batch and one by one
    (bad-inputs case C06: BatchNorm in train mode would fail this). The comparison is made in
    float64 when ``module`` can run in float64 (a float64 copy replaces it while ``fn`` runs), so
    that float32 kernels, whose rounding differs between batch sizes, are not read as batch
    dependence; the tolerance is relative to the largest output over the probe rows
    (:data:`PROBE_RTOL_FLOAT64`, or :data:`PROBE_RTOL_FLOAT32` when the model only runs in float32).

    Parameters
    ----------
    fn : callable
        (b, d) -> (b, ...) output of the model; when ``module`` is given, ``fn(x, net)`` runs ``net``.
    X : Tensor of shape (n, d)
    model : str
        The model's name in the error ("target model", "auxiliary model").
    module : torch.nn.Module, optional
        The network ``fn`` runs; a float64 copy of it (in eval mode) is probed when possible.

    Returns
    -------
    float
        The largest difference measured (0.0 with fewer than two rows).

    Raises
    ------
    InputError
        A difference above the tolerance; the message names the model and the measured difference.
    """
    x = X[:n_rows]
    if len(x) < 2:
        return 0.0
    batch = single = None
    rtol, precision = PROBE_RTOL_FLOAT32, "float32"
    if module is not None:
        try:
            with warnings.catch_warnings():    # TorchScript's .double() reads .grad of its parameters
                warnings.filterwarnings("ignore", message="The .grad attribute of a Tensor that is not a leaf")
                twin = float64_copy(module)
            with eval_mode(twin), torch.no_grad():
                x64 = x.double()
                batch = fn(x64, twin).reshape(len(x), -1).double()
                single = torch.cat([fn(x64[i : i + 1], twin).reshape(1, -1).double() for i in range(len(x))])
            rtol, precision = PROBE_RTOL_FLOAT64, "float64"
        except Exception:  # noqa: BLE001 - a model with float32 constants: probe it as it runs
            batch = single = None
    if batch is None:
        call = (lambda t: fn(t, module)) if module is not None else fn
        with torch.no_grad():
            x32 = x.float()
            batch = call(x32).reshape(len(x), -1).double()
            single = torch.cat([call(x32[i : i + 1]).reshape(1, -1).double() for i in range(len(x))])
    assert single is not None                       # set with batch, on either path
    diff = (batch - single).abs()
    worst = float(diff.max()) if diff.numel() else 0.0
    scale = float(torch.maximum(single.abs(), batch.abs()).max()) if single.numel() else 0.0
    if not worst <= rtol * max(scale, 1e-12):       # NaN differences fail too
        raise InputError(
            f"the {model}'s output for a row changes with the other rows of its batch: max difference {worst:.3g} "
            f"over {fmt_count(len(x))} probe rows, largest output {scale:.3g}, tolerance {rtol:g} of it "
            f"(compared in {precision}), even in eval mode; per-individual scores would depend on the "
            f"batch. Export the {model} with batch-independent layers (e.g. BatchNorm with running statistics)"
        )
    return worst

