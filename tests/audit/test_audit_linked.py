"""The drift audit over a linked protected file: the gate's join by the key, then the same audit as on the rows
with c joined by hand (faux_checks_flows.audit.linked_batches, then faux_checks.audit.drift.run_audit).

Synthetic data (300 rows a batch, ``_support.sex_proxy_frame``): x3 is a proxy of sex, so the target that leans
on x3 flags most individuals; c (``sex``) lives in its own file, keyed by ``id``, in another row order.
"""

from __future__ import annotations

import pandas as pd
import pytest

from _support import linear, sex_proxy_frame
from faux_checks.audit.drift import run_audit
from faux_checks.errors import ConfigurationError
from faux_checks.gate.policy import Policy
from faux_checks.inputs.tabular import FeatureSpec
from faux_checks_flows.audit import linked_batches


def _policy(**changes) -> Policy:
    payload = {"protected": "sex", "label": "y", "target_output": "logit", "min_aux_quality": 0.6,
               "faux": {"delta": 0.05, "max_flagged_fraction": 0.10}, "aux": {"hidden": [16], "epochs": 30},
               "decision": {"min_group_rows": 20, "aux_seeds": 1}, "testers": {}}
    return Policy.model_validate({**payload, **changes})


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    folder = tmp_path_factory.mktemp("linked-audit")
    reference = sex_proxy_frame(n=300, seed=0).assign(id=range(300))
    current = sex_proxy_frame(n=300, seed=1).assign(id=range(1000, 1300))
    people = pd.concat([reference, current])[["id", "sex"]].sample(frac=1.0, random_state=2)   # c's own file and order
    people.to_csv(folder / "people.csv", index=False)
    return reference, current, _policy(protected_file={"path": str(folder / "people.csv"), "join_on": "id"})


def test_the_audit_of_a_linked_file_equals_the_audit_of_the_rows_joined_by_hand(batches):
    reference, current, linked = batches
    ref, cur = linked_batches(linked, reference.drop(columns="sex"), current.drop(columns="sex"))
    for joined, by_hand in ((ref, reference), (cur, current)):           # c joined by the key, row for row
        assert joined["sex"].tolist() == by_hand["sex"].tolist() and len(joined) == len(by_hand)
    spec = FeatureSpec.fit(reference, ["x1", "x2", "x3"], name="x")       # c and the key are never model inputs
    model = linear([0.3, 0.0, 2.0])
    by_link = run_audit(model, ref, cur, policy=linked, feature_spec=spec)
    by_hand = run_audit(model, reference, current, policy=_policy(), feature_spec=spec)
    assert by_link.decision == by_hand.decision and by_link.limits == by_hand.limits
    assert by_link.fairness.flagged_fraction_current == by_hand.fairness.flagged_fraction_current > 0.5
    assert by_link.fairness.flagged_fraction_reference == by_hand.fairness.flagged_fraction_reference
    assert by_link.fairness.ks_pvalue == by_hand.fairness.ks_pvalue


def test_a_batch_with_keys_missing_from_the_file_is_refused_with_the_count(batches):
    reference, current, linked = batches
    stranger = current.drop(columns="sex")
    stranger.loc[:9, "id"] += 5000                                        # 10 people the protected file does not hold
    with pytest.raises(ConfigurationError, match=r"10 of 300 audit rows \(3.33%\) have no 'id' key"):
        linked_batches(linked, reference.drop(columns="sex"), stranger)
    assert linked_batches(_policy(), reference, current)[1] is current  # no protected file: the batch as it is
