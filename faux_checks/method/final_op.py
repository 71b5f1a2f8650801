"""The output form a torch target declares by its last operation: a final sigmoid or softmax.

A model whose output form the policy leaves at ``"auto"`` and whose single output column lies in [0, 1] could be
a probability or a logit. Where the model itself says so, :func:`final_output_form` reads it:

- a ``torch.export`` module (MLflow's ``pytorch`` flavor stores ``data/model.pt2``, loaded as an ``fx`` graph): the
  op that produces the graph's output;
- a TorchScript module (scripted or traced): the node that produces the graph's return value;
- any other ``torch.nn.Module`` (an ``nn.Sequential`` ending in ``nn.Sigmoid``): the last leaf module run on a probe
  batch, when its output is the model's output.

Shape-only ops after the activation (``squeeze``, ``view``, a column ``select``) are looked through. A sigmoid
gives ``"probability"``; a softmax ``"softmax"`` (one column of it: ``"probability"``); a log-softmax
``"logits"``. Anything else gives None: the form stays for the policy to declare.
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["final_output_form", "final_op_name"]

#: Ops that change a tensor's shape, copy or view it, or pick columns, never its values' meaning.
_SHAPE_OPS = frozenset({"squeeze", "unsqueeze", "view", "reshape", "flatten", "contiguous", "clone", "detach",
                        "alias", "to", "_to_copy", "select", "slice", "_unsafe_view", "expand", "type_as", "float",
                        "double", "getitem", "dropout", "identity"})
_Declared = Literal["probability", "softmax", "logits"]
_ACTIVATIONS: dict[str, _Declared] = {"sigmoid": "probability", "softmax": "softmax", "_softmax": "softmax", "log_softmax": "logits",
                "_log_softmax": "logits"}
_MODULES = {torch.nn.Sigmoid: "sigmoid", torch.nn.Softmax: "softmax", torch.nn.LogSoftmax: "log_softmax"}


def _op(name: str) -> str:
    """``aten::sigmoid`` / ``aten.sigmoid.default`` / ``<built-in function getitem>`` -> ``sigmoid`` / ``getitem``."""
    name = name.replace("::", ".").split(" ")[-1].rstrip(">")
    parts = name.split(".")
    if parts[0] in ("aten", "prim") and len(parts) > 1:
        return parts[1]
    return parts[-1]


def _fx_final(model) -> str | None:
    """The op producing an ``fx`` graph's (first) output, looked through shape ops."""
    outputs = [n for n in model.graph.nodes if n.op == "output"]
    if not outputs:
        return None
    node = outputs[0].args[0]
    while isinstance(node, (tuple, list)) and node:
        node = node[0]
    while isinstance(node, torch.fx.Node):
        if node.op != "call_function" and node.op != "call_method":
            return None if node.op != "call_module" else _module_op(model.get_submodule(str(node.target)))
        name = _op(str(getattr(node.target, "__name__", node.target)) if node.op == "call_method" else str(node.target))
        if name not in _SHAPE_OPS or not node.args:
            return name
        node = node.args[0]
    return None


def _script_final(model) -> str | None:
    """The node kind producing a TorchScript graph's (first) return value, looked through shape ops."""
    graph = model.inlined_graph                     # held: the nodes below belong to it
    node = graph.return_node().inputsAt(0).node()
    while True:
        kind = node.kind()
        if kind in ("prim::TupleConstruct", "prim::ListConstruct"):
            node = node.inputsAt(0).node()
            continue
        name = _op(kind)
        if name not in _SHAPE_OPS:
            return name
        node = node.inputsAt(0).node()


def _module_op(module) -> str | None:
    return next((name for kind, name in _MODULES.items() if isinstance(module, kind)), None)


def _hooked_final(model, X_probe: torch.Tensor) -> str | None:
    """The last leaf module run on ``X_probe`` when its output is the model's output (values equal)."""
    seen: list = []
    hooks = [m.register_forward_hook(lambda mod, _inp, out: seen.append((mod, out)))
             for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            out = model(X_probe)
    finally:
        for h in hooks:
            h.remove()
    if isinstance(out, (tuple, list)):
        out = out[0]
    if not seen or not isinstance(out, torch.Tensor):
        return None
    module, last = seen[-1]
    if not isinstance(last, torch.Tensor) or last.numel() != out.numel():
        return None
    if not torch.equal(last.reshape(-1), out.reshape(-1)):
        return None
    return _module_op(module) or type(module).__name__


def final_op_name(model, X_probe: torch.Tensor) -> str | None:
    """The name of the last operation of a torch target (``sigmoid``, ``linear``, ``Linear``), or None when it
    cannot be read (not a torch module, or a graph this reader does not follow). X_probe : Tensor (n, d)."""
    try:
        if isinstance(model, torch.fx.GraphModule):
            return _fx_final(model)
        if isinstance(model, torch.jit.ScriptModule):
            return _script_final(model)
        if isinstance(model, torch.nn.Module):
            return _hooked_final(model, X_probe)
    except (RuntimeError, AttributeError, TypeError, IndexError):     # a graph or module this reader cannot follow
        return None
    return None


def final_output_form(model, X_probe: torch.Tensor, n_outputs: int) -> _Declared | None:
    """The output form the model's last operation declares, or None.

    Parameters
    ----------
    model : torch module (``fx`` graph, TorchScript or eager)
    X_probe : Tensor of shape (n_probe, d)
    n_outputs : int
        The model's output width m (a softmax read as one column is ``"probability"``).

    Returns
    -------
    {"probability", "softmax", "logits"} or None
    """
    form = _ACTIVATIONS.get(final_op_name(model, X_probe) or "")
    if form == "softmax" and n_outputs == 1:
        return "probability"
    if form == "probability" and n_outputs != 1:
        return None                     # element-wise sigmoids over several columns: not one distribution
    if form == "logits" and n_outputs == 1:
        return None
    return form
