"""The target's declared output form, read as P(y = target_class | x): one place for every reader.

A target model returns a logit, a probability, softmax probabilities or class scores. The policy
declares which (:class:`TargetOutput`), :func:`resolve_output_form` checks the declaration on a
probe batch, and :func:`probability` turns a raw output into P(y = target_class | x):

- the fAux tester and FTA differentiate it (:func:`faux_checks.method.gradients.target_probability_and_gradient`,
  through :func:`log_odds` for logit forms, so that σ'(z) is formed in float64);
- the baselines, the ground truth and the audit read it without gradients (:func:`predict_probability`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from .._device import host
from ..errors import InputError
from ._batching import DEFAULT_CHUNK, as_tensor, eval_mode, iter_chunks

__all__ = [
    "OutputForm",
    "PROBABILITY_FORMS",
    "TargetOutput",
    "float64_copy",
    "log_odds",
    "predict_probability",
    "probability",
    "raw_output",
    "resolve_output_form",
]

OutputForm = Literal["auto", "logit", "probability", "softmax", "logits", "value"]

#: The forms read as a probability (everything but ``"value"``, a regression output or score in its own unit).
PROBABILITY_FORMS = ("logit", "probability", "softmax", "logits")


@dataclass(frozen=True)
class TargetOutput:
    """How to read the target model's output as P(y = target_class | x).

    Attributes
    ----------
    form : {"auto", "logit", "probability", "softmax", "logits"}
        ``"logit"``: one column (or a vector) of log-odds; ``"probability"``: one column of
        sigmoid probabilities; ``"softmax"``: m ≥ 2 columns of probabilities summing to 1;
        ``"logits"``: m ≥ 2 columns of unnormalised class scores (softmax applied here).
        ``"value"``: one column read as it is, in the output's own unit (a regression output or a score: a credit
        limit, a price); δ is then in that unit (policy ``[faux] unit``) and every "probability" this module
        returns is that value. ``"auto"`` resolves on a probe batch and refuses when the form is ambiguous (one column
        with every value in [0, 1]); for a forward-only target whose loader knows its form
        (:class:`~faux_checks.method.forward.ForwardOnlyTarget` ``output_form``), ``"auto"`` is that form.
    target_class : int
        Class whose probability is tested (default 1, the favourable outcome of a binary target).
    """

    form: OutputForm = "auto"
    target_class: int = 1


def raw_output(model, x: torch.Tensor) -> torch.Tensor:
    """The model's output for x as a tensor of shape (n, m) (a (n,) output becomes (n, 1)).

    Raises
    ------
    InputError
        The model returned something other than a tensor, or a shape other than (n,) / (n, m).
    """
    out = model(x)
    if isinstance(out, (tuple, list)):
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise InputError(f"the target model returned {type(out).__name__}, expected a tensor")
    if out.ndim == 1:
        out = out[:, None]
    if out.ndim != 2 or out.shape[0] != x.shape[0]:
        raise InputError(
            f"the target model returned shape {tuple(out.shape)} for {x.shape[0]} rows; expected (n,) or (n, m)"
        )
    return out


def resolve_output_form(model, X_probe: torch.Tensor, output: TargetOutput) -> TargetOutput:
    """Check the declared output form against a probe batch; resolve ``"auto"``.

    Parameters
    ----------
    X_probe : Tensor of shape (n_probe, d)

    ``"value"`` (a regression output) is never inferred: ``"auto"`` refuses a target whose loader knows it returns a
    value (a scikit-learn regressor), and a declared ``"value"`` is refused for a target that says it returns a
    probability (a classifier's loader form, a final sigmoid or softmax).

    ``"auto"`` takes, in turn: a forward-only target's known form, the form a torch target's last operation
    declares (a final sigmoid or softmax, :func:`faux_checks.method.final_op.final_output_form`), and the probe's
    values (a single column outside [0, 1] is a logit; columns summing to 1 are softmax probabilities).

    Raises
    ------
    InputError
        The form does not fit the output's width, ``target_class`` is out of range, or
        ``"auto"`` cannot tell a probability from a logit (the message names the policy key ``target_output``).
    """
    from .final_op import final_op_name, final_output_form

    with torch.no_grad(), eval_mode(model):
        out = raw_output(model, X_probe.float())
        m = out.shape[1]
        form = output.form
        _check_value_declaration(model, X_probe.float(), m, form)
        if form == "auto" and getattr(model, "output_form", "auto") != "auto":
            form = model.output_form          # a forward-only target whose loader knows its output (method/forward.py)
        elif form == "auto":
            form = final_output_form(model, X_probe.float(), m) or "auto"    # a final sigmoid / softmax says it
        last = final_op_name(model, X_probe.float()) if form == "auto" else None
    if form == "auto":
        if m == 1:
            inside = bool(((out >= 0) & (out <= 1)).all())
            if inside:
                ends = f" (its last operation, '{last}', does not say which)" if last else ""
                raise InputError(
                    f"the target model's single output lies in [0, 1] on every probe row: it could be a "
                    f"probability or a logit{ends}. Declare it: output form 'probability' or 'logit' "
                    "(policy target_output = '...', CLI --output-form); a model whose last module is nn.Sigmoid or "
                    "nn.Softmax, or a scripted or exported model ending in a sigmoid or softmax, is read without it"
                )
            form = "logit"
        else:
            sums_to_one = bool(torch.allclose(out.sum(dim=1), torch.ones(len(out)), atol=1e-4)) and bool((out >= 0).all())
            form = "softmax" if sums_to_one else "logits"
    if form == "value":
        if m != 1:
            raise InputError(f"output form 'value' needs one output column but the target model returns {m}; a "
                             "classifier's outputs are read with 'logit', 'probability', 'softmax' or 'logits'")
        return TargetOutput(form="value", target_class=output.target_class)
    if form in ("logit", "probability") and m != 1:
        raise InputError(
            f"output form '{form}' needs one output column but the target model returns {m}; "
            "declare 'softmax' (probabilities) or 'logits' (class scores)"
        )
    if form in ("softmax", "logits"):
        if m < 2:
            raise InputError(f"output form '{form}' needs at least 2 output columns, the model returns {m}")
        if not 0 <= output.target_class < m:
            raise InputError(f"target_class {output.target_class} is out of range for {m} output columns (0..{m - 1})")
    elif output.target_class not in (0, 1):
        raise InputError(f"target_class {output.target_class} is out of range for a binary output (0 or 1)")
    if form == "probability" and not bool(((out >= 0) & (out <= 1)).all()):
        raise InputError("output form 'probability' declared but the model returns values outside [0, 1]; declare 'logit'")
    return TargetOutput(form=form, target_class=output.target_class)


def _check_value_declaration(model, X_probe: torch.Tensor, m: int, form: str) -> None:
    """Refuse a declared form that contradicts what the target says it returns (a value or a probability)."""
    from .final_op import final_output_form

    known = getattr(model, "output_form", "auto")
    if known == "value" and form != "value":
        raise InputError(
            f"the target model returns a value (a regressor: {getattr(model, 'access', type(model).__name__)}), not a "
            f"probability; output form {form!r} does not apply. Declare it: policy target_output = 'value' "
            "(CLI --output-form value) with δ in the output's unit ([faux] delta and unit, e.g. delta = 500, "
            "unit = \"EUR\")")
    if form != "value":
        return
    declared = known if known != "auto" else final_output_form(model, X_probe, m)
    if declared in PROBABILITY_FORMS:
        raise InputError(
            f"output form 'value' declared but the target model says it returns a probability (form {declared!r}: a "
            "classifier, or a last operation that is a sigmoid or softmax); gate a classifier with target_output "
            "'auto', 'logit', 'probability', 'softmax' or 'logits' and δ in probability points (no [faux] unit)")


def float64_copy(model):
    """A float64 copy of the target model (probability forms are differentiated in float64)."""
    try:
        twin = copy.deepcopy(model)
        twin.double()
        return twin
    except Exception as exc:  # pragma: no cover - depends on the model's code
        raise InputError(
            f"cannot differentiate the target model in float64 ({exc}); export it with a logit output "
            "and declare output form 'logit'"
        ) from exc


def log_odds(out: torch.Tensor, output: TargetOutput) -> torch.Tensor:
    """Log-odds of the tested class from a raw logit output: (b, m) -> (b,), differentiable.

    ``"logit"``: the column, negated for ``target_class`` 0; ``"logits"``: z_cls − logsumexp of
    the other classes' scores (exact and stable).

    Raises
    ------
    InputError
        For the probability forms (read them with :func:`probability`).
    """
    cls = output.target_class
    if output.form == "logit":
        return out[:, 0] if cls == 1 else -out[:, 0]
    if output.form == "logits":
        others = torch.cat([out[:, :cls], out[:, cls + 1 :]], dim=1)
        return out[:, cls] - torch.logsumexp(others, dim=1)
    raise InputError(f"log-odds need output form 'logit' or 'logits', got {output.form!r}")


def probability(out: torch.Tensor, output: TargetOutput) -> torch.Tensor:
    """P(y = target_class | x) from a raw output: (b, m) -> (b,), in the output's dtype, differentiable.

    For the form ``"value"`` it is the output itself, in its own unit (a regression target has no probability).

    Parameters
    ----------
    out : Tensor of shape (b, m)
        The model's raw output (:func:`raw_output`).
    output : TargetOutput
        A resolved form (:func:`resolve_output_form`).

    Raises
    ------
    InputError
        If the form is still ``"auto"``.
    """
    form, cls = output.form, output.target_class
    if form == "value":
        return out[:, 0]                     # the raw output, in its own unit (no sigmoid)
    if form == "logit":
        return torch.sigmoid(log_odds(out, output))
    if form == "probability":
        return out[:, 0] if cls == 1 else 1.0 - out[:, 0]
    if form == "softmax":
        return out[:, cls]
    if form == "logits":
        return torch.softmax(out, dim=1)[:, cls]
    raise InputError(f"resolve the output form first (got {form!r})")


def predict_probability_tensor(model, X: torch.Tensor, output: TargetOutput, *,
                               chunk_size: int = DEFAULT_CHUNK) -> torch.Tensor:
    """:func:`predict_probability` as a float64 Tensor (n,) on X's device (no transfer to the host).

    For a torch target whose rows are already on its device (the swap reading's device path,
    :func:`faux_checks.method.chunk.swap_chunk`); the same float64 sigmoid/softmax, so on the CPU it
    equals :func:`predict_probability` bit for bit. X : Tensor (n, d). Raises InputError as :func:`raw_output`.
    """
    with torch.no_grad(), eval_mode(model):
        parts = [probability(raw_output(model, X[sl]).double(), output) for sl in iter_chunks(X.shape[0], chunk_size)]
    return torch.cat(parts) if parts else torch.empty(0, dtype=torch.float64, device=X.device)


def predict_probability(model, X, output: TargetOutput, *, chunk_size: int = DEFAULT_CHUNK) -> np.ndarray:
    """P(y = target_class | x) of every row, without gradients.

    The sigmoid/softmax is applied in float64 to the model's float32 output, as in
    :func:`faux_checks.method.gradients.target_probability_and_gradient`, so two rows with the
    same model output get bit-identical probabilities (an FTU flip of an ignored column scores 0).

    Parameters
    ----------
    model : torch.nn.Module or TorchScript module
    X : ndarray or Tensor of shape (n, d)
    output : TargetOutput
        A resolved form (:func:`resolve_output_form`).
    chunk_size : int
        Rows per forward pass.

    Returns
    -------
    ndarray of shape (n,), float64
    """
    X = as_tensor(X)
    out = np.empty(X.shape[0], dtype=np.float64)
    with torch.no_grad(), eval_mode(model):
        for sl in iter_chunks(X.shape[0], chunk_size):
            out[sl] = host(probability(raw_output(model, X[sl]).double(), output))   # (b,)
    return out
