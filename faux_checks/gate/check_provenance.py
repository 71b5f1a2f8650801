"""A check's provenance: what makes its decision reproducible (hashes, settings as used, seeds, versions).

:func:`check_provenance` is the ``provenance`` of :func:`faux_checks.gate.one_attribute.check_one_attribute`'s result;
:func:`target_access_record` adds how the target's change and its evidence were obtained (gradients,
or forward passes only for a forward-only target).
"""

from __future__ import annotations

import platform
from typing import Any

import pandas as pd
import torch

from ..method.forward import FD_STEP, is_forward_only, target_access
from ..method.output import TargetOutput
from ..provenance import data_sha256, package_versions, utc_now
from .aux_model import AuxFit, aux_training
from .policy_schema import Policy
from .rows import AuditRows
from .scorer import swap_categorical

__all__ = ["check_provenance", "target_access_record"]


def target_access_record(target_model, policy: Policy, resolved: TargetOutput) -> dict[str, Any]:
    """How the target's change (score) and its per-feature evidence were obtained, for the report."""
    if not is_forward_only(target_model):
        return {"target_access": target_access(target_model)}
    swap = policy.faux.variant == "swap"
    return {
        "target_access": target_access(target_model),
        "target_differentiation": (
            "none: the score is the target's predicted change f(x′) − f(x) (two forward passes per counterfactual)"
            if swap else f"central finite differences along J⁺, largest feature move {FD_STEP:g} in its encoded scale"),
        "evidence_method": ("telescoping decomposition of the change over the moving features, mean of two orders "
                            "(forward passes only; integrated gradients need gradients)"),
    }


def check_provenance(frame: pd.DataFrame, policy: Policy, audit: AuditRows, resolved: TargetOutput, aux: AuxFit, *,
                given: bool, model_info: dict | None, target_model=None) -> dict[str, Any]:
    """Everything that makes the decision reproducible: hashes, settings as used, seeds, versions."""
    faux, model = policy.faux, aux.model
    return {
        "checked_at": utc_now(),
        "seed": policy.seed,
        "policy_name": policy.name,
        "policy_sha256": policy.sha256(),
        "policy": policy.model_dump(mode="json"),
        "data_sha256": data_sha256(frame),
        "n_input_rows": len(frame),
        "feature_spec": audit.feature_spec.name,
        "n_features": audit.X.shape[1],
        "variant": faux.variant,
        "score_unit": (f"{faux.unit}: |Δŷ| when only the protected attribute changes (the target's own unit)"
                       if faux.variant == "swap" and resolved.form == "value"
                       else "probability points: |Δŷ| when only the protected attribute changes" if faux.variant == "swap"
                       else "|cos| in [0, 1]" if faux.variant == "ng"
                       else "change of ŷ per unit of the auxiliary model's output"),
        "swap": ({"admissible": list(faux.admissible), "metric": faux.swap_metric, "steps": faux.swap_steps,
                  "line_search": faux.swap_line_search,
                  "evaluation": faux.swap_evaluation, "categorical": swap_categorical(faux, target_model),
                  "reference_rows": int(len(aux.rows))} if faux.variant == "swap" else None),
        "target_output": resolved.form,
        "unit": faux.unit if resolved.form == "value" else None,     # δ's and the scores' unit (a value target)
        "target_class": resolved.target_class,
        "target_differentiation": ("P(y|x) by σ'(z)·∇z in float64 from the logit" if resolved.form in ("logit", "logits")
                                   else "the raw output, its own unit (no sigmoid)" if resolved.form == "value"
                                   else "P(y|x) in a float64 copy of the model"),
        "aux_output_space": model.output_space,
        "aux_epochs_run": getattr(model, "epochs_run_", None),
        "aux_given": given,
        "aux_training": None if given else aux_training(model),
        "audit_sample_seed": policy.seed,
        "aux_sample_seed": policy.seed + 1,
        "n_audited": len(audit.X),
        "ridge": faux.ridge,
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "torch_deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "platform": platform.platform(terse=True),
        "machine": platform.machine(),
        "protected_kind": audit.protected.kind,
        "groups": list(audit.protected.groups),
        "packages": package_versions(),
        **(model_info or {}),
    }
