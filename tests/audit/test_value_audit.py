"""The drift audit of a value target (``target_output = "value"``, ``[faux] unit = "EUR"``).

Truth: the target is a credit limit ``1000·x0 + 800·c`` EUR, so changing only c moves every person's limit by
800 EUR > δ = 500 EUR. Classification quality reads the output as a probability: for a limit in EUR it is
"not applicable", never a number, and the audit's fAux rows state δ in EUR.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from faux_checks.audit.drift import run_audit
from faux_checks.gate.policy import Policy
from faux_checks.inputs.tabular import FeatureSpec
from faux_checks.report.build import write_report

FEATURES = ["x0", "x1", "proxy", "c"]


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 2, n)
    df = pd.DataFrame({"x0": rng.normal(size=n), "x1": rng.normal(size=n),
                       "proxy": 2.0 * c + rng.normal(scale=0.5, size=n), "c": c})
    df["y"] = (df["x0"] > 0).astype(int)        # a label: classification quality would otherwise be computed
    return df


def test_audit_of_a_value_target_has_no_classification_number_and_states_delta_in_its_unit(tmp_path):
    ref, cur = _frame(400, 0), _frame(400, 1)
    spec = FeatureSpec.fit(ref, FEATURES)
    assert spec.n_features == 4
    std = {c.name: c.std for c in spec.columns}
    limit = torch.nn.Linear(4, 1)                 # on standardised inputs: 1000 EUR per x0, 800 EUR for c = 1
    with torch.no_grad():
        limit.weight[:] = torch.tensor([[1000.0 * std["x0"], 0.0, 0.0, 800.0 * std["c"]]])
        limit.bias.fill_(5000.0)
    policy = Policy.model_validate({
        "protected": "c", "label": "y", "target_output": "value", "min_aux_quality": 0.7, "aux": {"epochs": 10},
        "faux": {"delta": 500.0, "unit": "EUR", "max_flagged_fraction": 0.2}, "decision": {"min_group_rows": 20},
        "audit": {"max_roc_auc_drop": 0.05, "min_rows": 100}})
    result = run_audit(limit, ref, cur, policy=policy, feature_spec=spec)

    cls = result.classification
    assert cls.status == "not applicable" and cls.metrics == {}
    assert cls.reason.startswith("not applicable (value target, unit EUR)")
    auc = next(r for r in result.limits if r["rule"] == "max_roc_auc_drop")
    assert auc["status"] == "not computed" and auc["observed"] is None     # fails closed, never a number
    assert "not applicable (value target, unit EUR)" in auc["detail"]
    assert result.decision != "passed"
    # every person's limit moves by 800 EUR > 500 EUR when only c changes: flagged on both batches
    fairness = result.fairness
    assert fairness.reference.provenance["unit"] == "EUR"
    assert fairness.flagged_fraction_reference > 0.9 and fairness.flagged_fraction_current > 0.9
    rows = {r["rule"]: r for r in result.limits}
    assert rows["max_flagged_fraction_increase"]["detail"].startswith("flagged fraction at δ=500 EUR ")
    assert "(EUR)" in rows["score_ks"]["detail"]
    assert rows["current_check"]["status"] == "exceeded" and "δ=500 EUR" in rows["current_check"]["detail"]
    payload = result.to_dict()
    json.dumps(payload, allow_nan=False)
    assert payload["classification"]["status"] == "not applicable"
    # the report validates against its schema and the page says why, with the unit
    paths = write_report(tmp_path, kind="audit", decision=result.decision, reasons=result.reasons,
                         check=fairness.current.to_dict(), audit=payload)
    page = Path(paths["html"]).read_text()
    assert "Classification quality: not applicable (value target, unit EUR)" in page
