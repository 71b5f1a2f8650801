"""One protected attribute is a list of one.

The policy's two ways of naming protected attributes, ``protected = "sex"`` (with ``protected_kind``
and a top-level ``[linked_columns]``) and ``[[attributes]]`` tables, must keep what users recorded:
the hash (``fairness_policy_sha256`` tags, evidence packs) and the dump (``report.json``'s
``policy``) of a policy are pinned below as computed on main before the loader rewrote the
single-attribute form (commit a2379b7). A changed value here means every recorded decision stops
matching its policy.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from faux_checks.errors import InputError
from faux_checks.gate.policy import Policy, load_policy, policy_path

BASE = {"faux": {"delta": 0.1, "max_flagged_fraction": 0.05, "admissible": ["z0"]}}
LINKED = {**BASE, "protected": "sex", "protected_kind": "binary", "linked_columns": {"rel": {"M": "H", "F": "W"}},
          "testers": {"linked_columns": {"threshold": 0.1}}}
SEVERAL = {**BASE, "attributes": [{"column": "sex"}, {"column": "race", "kind": "multiclass"}],
           "intersections": [["sex", "race"]]}
ONE_TABLE = {**BASE, "attributes": [{"column": "sex"}]}


def _dump_sha(policy: Policy) -> str:
    dump = policy.model_dump(mode="json")
    assert dump["scale"].pop("device") == "auto"   # added after the pin ([scale] device, not hashed)
    assert dump.pop("missing_values") == "auto"    # added after the pin (hashed only when set otherwise)
    assert dump["aux"].pop("cross_fit_folds") == 5  # added after the pin (hashed only when set otherwise)
    assert dump.pop("favourable_label") is None     # added after the pin; unset, not hashed
    assert dump.pop("protected_file") is None       # added after the pin; unset, not hashed
    assert dump.pop("protected_probabilities") is None  # added after the pin; unset, not hashed
    assert dump["faux"].pop("unit") is None         # added after the pin; unset, not hashed
    assert dump["faux"].pop("cutoff") is None and dump["faux"].pop("cutoff_side") is None   # the same
    return hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()


PINNED = [  # (policy, Policy.sha256(), sha256 of its model_dump(mode="json")) on main a2379b7
    (lambda: load_policy(policy_path("adult")).with_overrides(favourable_label=None),   # less its later declaration
     "61f207b3beeed8d9d3b63e6d670b6b06c1566e25896006be3f60cf48a9f83252",
     "f7a16c87d59bd895c05d093e02a18bc87f3061bf57df03f38edc1a66296d55a2"),
    (lambda: load_policy(protected="sex"),
     "018fc1f5a0b4cb9d1878c8bcb2dcabaea0311e1794292124d4ebc27b1e7d63d2",
     "91ed247bf11f91983c5548a3587bd3d900bc3235c6e8e081855296e2893200c3"),
    (lambda: Policy.model_validate(LINKED),
     "39cfcfac0b6683687ef934769a1f42d7f002e8ee7162e49424579f9db340deb9",
     "502bb834a263448ac69b09b135602cca01b766f65eb2227a14e7e3a0635bcf44"),
    (lambda: Policy.model_validate(SEVERAL),
     "97fe1497b6ccc01fbfb1b3ba2bd28d706f55e41cd2c44ff70b6fa9dbced0d6fd",
     "d3d00c4d4d3792ca850d1e817880e0f187d335297f4012d696058c83901f3471"),
    (lambda: Policy.model_validate(ONE_TABLE),
     "1518621c670496e451b882906841c774876ed83aceb79ff20383b3bab1e42411",
     "68abce8f0104447de8ff33d175ccfac85307d0939a814a28e99d8f816900f565"),
]


@pytest.mark.parametrize("make, sha, dump_sha", PINNED, ids=["adult", "default-sex", "linked", "several", "one-table"])
def test_policy_hash_and_dump_are_the_recorded_ones(make, sha, dump_sha):
    policy = make()
    assert policy.sha256() == sha
    assert _dump_sha(policy) == dump_sha
    again = Policy.model_validate(policy.model_dump(mode="json"))     # what a recorded policy reads back as
    assert again == policy and again.sha256() == sha


def test_the_single_attribute_form_reads_as_a_list_of_one():
    policy = Policy.model_validate(LINKED)
    (one,) = policy.attributes
    assert (one.column, one.kind, one.admissible) == ("sex", "binary", None)
    assert one.linked_columns == {"rel": {"M": "H", "F": "W"}}
    assert policy.attribute_names == ["sex"] and not hasattr(policy, "reports_per_attribute")  # one output shape
    assert policy.model_dump(mode="json")["attributes"] == []                  # dumped as written
    assert policy.attribute_policies() == {"sex": policy}                       # its attribute's policy is itself
    table = Policy.model_validate(ONE_TABLE)
    assert [a.column for a in table.attributes] == ["sex"] and table.attribute_names == policy.attribute_names
    assert table.attribute_policies()["sex"].attributes[0].column == "sex"


def test_a_policy_setting_the_output_shape_is_refused_with_what_to_do(tmp_path):
    written = tmp_path / "shape.toml"
    written.write_text("reports_per_attribute = false\n" + policy_path("adult").read_text())
    with pytest.raises(InputError) as info:
        load_policy(written)
    message = str(info.value)
    assert "reports_per_attribute: not a setting: every output has one section per protected attribute" in message
    assert "remove it" in message and "unknown key" not in message


def test_an_error_in_the_single_form_is_reported_once_under_the_key_written():
    with pytest.raises(InputError) as info:
        load_policy(policy_path("adult"), protected_kind="ordinal")
    message = str(info.value)
    assert message.count("ordinal") == 1 and "protected_kind: found 'ordinal' (string)" in message
    assert "attributes" not in message
    with pytest.raises(InputError, match="protected = 'sex' and \\[\\[attributes\\]\\] \\['race'\\] are both set"):
        load_policy(policy_path("adult"), attributes=[{"column": "race"}])
