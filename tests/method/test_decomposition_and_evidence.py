"""The per-individual decomposition (closed forms), the evidence pack (hashes and Ed25519), the group table."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks.baselines.group_metrics import group_table
from faux_checks.errors import InputError
from faux_checks.method.decomposition import grouped_shapley
from faux_checks.report.evidence import build_evidence, canonical_bytes, generate_key, write_evidence_pack
from faux_checks.report.verify import verify_pack


# ----------------------------------------------------------------------------------------- decomposition
def _linear(w, b=0.1):
    w = torch.as_tensor(w, dtype=torch.float32)
    return lambda x: (x @ w + b).numpy()


def test_linear_target_parts_are_the_closed_form_and_sum_to_the_total():
    rng = np.random.default_rng(0)
    w = rng.normal(size=6) / 10
    x = torch.as_tensor(rng.normal(size=(50, 6)), dtype=torch.float32)
    x1 = x + torch.as_tensor(rng.normal(size=(50, 6)), dtype=torch.float32)
    groups = {"direct": np.array([1, 0, 0, 0, 0, 0], bool), "proxies": np.array([0, 1, 1, 1, 0, 0], bool),
              "admissible": np.array([0, 0, 0, 0, 1, 1], bool)}
    f = _linear(w)
    parts = grouped_shapley(f, x, x1, groups)
    dx = (x1 - x).double().numpy()
    for name, m in groups.items():
        np.testing.assert_allclose(parts[name], dx[:, m] @ w[m], atol=1e-6)
    total = f(x1).astype(np.float64) - f(x).astype(np.float64)
    np.testing.assert_allclose(sum(parts.values()), total, atol=1e-6)


def test_nonlinear_target_parts_still_sum_exactly_and_a_dummy_group_gets_zero():
    rng = np.random.default_rng(1)
    x = torch.as_tensor(rng.normal(size=(40, 5)), dtype=torch.float32)
    x1 = x + torch.as_tensor(rng.normal(size=(40, 5)), dtype=torch.float32)
    # the target reads columns 1..4 only: column 0 (c's own column, "direct") is not an input
    f = lambda z: torch.sigmoid(z[:, 1] * z[:, 2] + torch.tanh(z[:, 3]) - z[:, 4] ** 2).numpy()   # noqa: E731
    groups = {"direct": np.array([1, 0, 0, 0, 0], bool), "proxies": np.array([0, 1, 1, 0, 0], bool),
              "admissible": np.array([0, 0, 0, 1, 1], bool)}
    parts = grouped_shapley(f, x, x1, groups, chunk_rows=24)      # several chunks
    total = f(x1).astype(np.float64) - f(x).astype(np.float64)
    np.testing.assert_allclose(sum(parts.values()), total, atol=1e-6)
    # a group the target does not read gets 0 up to float32 rounding: the coalitions are scored in one batch and
    # torch 2.13's vectorised sigmoid/tanh can differ by one ulp between batch positions (measured: 9.9e-9 on 3 of 40 rows)
    np.testing.assert_allclose(parts["direct"], 0.0, atol=1e-7)
    # two groups: the Shapley value of a pure interaction splits it in halves
    g = lambda z: (z[:, 0] * z[:, 1]).numpy()                     # noqa: E731
    a = torch.zeros(1, 2)
    b = torch.ones(1, 2)
    two = grouped_shapley(g, a, b, {"p": np.array([1, 0], bool), "q": np.array([0, 1], bool)})
    assert two["p"][0] == pytest.approx(0.5) and two["q"][0] == pytest.approx(0.5)


def test_moved_column_outside_every_group_and_overlaps_are_refused():
    x = torch.zeros(2, 3)
    x1 = torch.ones(2, 3)
    f = _linear([1.0, 1.0, 1.0])
    with pytest.raises(InputError, match="in no group"):
        grouped_shapley(f, x, x1, {"a": np.array([1, 1, 0], bool)})
    with pytest.raises(InputError, match="overlap"):
        grouped_shapley(f, x, x1, {"a": np.array([1, 1, 0], bool), "b": np.array([0, 1, 1], bool)})


# ----------------------------------------------------------------------------------------- evidence pack
@pytest.fixture()
def gate_folder(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    data = tmp_path / "audit.csv"
    data.write_text("age,sex\n30,F\n40,M\n")
    policy = tmp_path / "policy.toml"
    policy.write_text("[decision]\nmax_flagged_fraction = 0.05\n")
    report = {"decision": "failed", "exit_code": 1, "rule": "max_flagged_fraction",
              "rules": [{"rule": "max_flagged_fraction", "status": "exceeded", "value": 0.2, "limit": 0.05}],
              "model": {"name": "m", "version": "2"}, "policy_sha256": "ab"}
    (run / "report.json").write_text(json.dumps(report))
    return run, data, policy, report


def test_signed_pack_verifies_and_one_changed_byte_of_data_or_policy_is_refused(gate_folder, tmp_path):
    run, data, policy, report = gate_folder
    key, pub = generate_key(tmp_path / "keys" / "signer")
    ev = build_evidence(report=report, files={"data": data, "policy": policy, "report": run / "report.json"},
                        pack_dir=run)
    assert ev["files"]["report"] == {**ev["files"]["report"], "path": "report.json", "relative": True}
    write_evidence_pack(run, ev, signing_key=key)
    ok = verify_pack(run, public_key=pub)
    assert ok.ok and ok.signed and ok.pinned, ok.lines()
    assert ok.decision == "failed"
    for target in (data, policy):
        original = target.read_bytes()
        target.write_bytes(original[:-2] + bytes([original[-2] ^ 1]) + original[-1:])   # one bit of one byte
        bad = verify_pack(run, public_key=pub)
        assert not bad.ok
        assert [c.item for c in bad.checks if c.status == "failed"] == [target.stem if target is policy else "data"]
        target.write_bytes(original)
    assert verify_pack(run, public_key=pub).ok


def test_edited_pack_wrong_key_unsigned_and_moved_files(gate_folder, tmp_path):
    run, data, policy, report = gate_folder
    key, _ = generate_key(tmp_path / "k1")
    _, other_pub = generate_key(tmp_path / "k2")
    ev = build_evidence(report=report, files={"data": data, "policy": policy, "report": run / "report.json"},
                        pack_dir=run)
    path = write_evidence_pack(run, ev, signing_key=key)
    with pytest.raises(InputError, match="never overwritten"):
        write_evidence_pack(run, ev, signing_key=key)
    assert not verify_pack(run, public_key=other_pub).ok                   # signed by someone else
    payload = json.loads(path.read_text())
    payload["evidence"]["decision"] = "passed"                             # the decision edited after signing
    path.write_text(json.dumps(payload))
    res = verify_pack(run)
    assert not res.ok and "does not match" in res.checks[-1].detail
    # unsigned: refused unless the reviewer accepts hashes only
    unsigned = tmp_path / "unsigned"
    unsigned.mkdir()
    (unsigned / "report.json").write_text(json.dumps(report))
    write_evidence_pack(unsigned, build_evidence(report=report, files={"data": data, "report": unsigned / "report.json"},
                                                 pack_dir=unsigned))
    assert not verify_pack(unsigned).ok
    assert verify_pack(unsigned, allow_unsigned=True).ok
    # a moved file: missing, then found with files=
    moved = tmp_path / "elsewhere.csv"
    data.rename(moved)
    res = verify_pack(unsigned, allow_unsigned=True)
    assert [c.status for c in res.checks if c.item == "data"] == ["missing"]
    assert verify_pack(unsigned, allow_unsigned=True, files={"data": moved}).ok
    with pytest.raises(InputError, match="holds"):
        verify_pack(unsigned, files={"modle": moved})


def test_canonical_bytes_do_not_depend_on_key_order():
    assert canonical_bytes({"b": 1, "a": [1, 2]}) == canonical_bytes({"a": [1, 2], "b": 1}) == b'{"a":[1,2],"b":1}'


# ----------------------------------------------------------------------------------------- group table
def test_group_table_rates_impact_ratios_and_intersections_match_direct_counts():
    sensitive = pd.DataFrame({"sex": ["F", "F", "F", "M", "M", "M", "M", "M"],
                              "race": ["a", "b", "a", "a", "b", "b", "a", "a"]})
    selected = np.array([1, 0, 0, 1, 1, 0, 1, 1])
    prob = np.array([0.9, 0.2, 0.4, 0.8, 0.7, 0.3, 0.6, 0.9])
    rows = group_table(selected, prob, sensitive, favourable=True, flagged=np.array([1, 0, 0, 0, 0, 0, 0, 1.0]))
    by = {(r["attribute"], r["group"]): r for r in rows}
    assert by[("sex", "F")]["count"] == 3 and by[("sex", "F")]["favourable_rate"] == pytest.approx(1 / 3)
    assert by[("sex", "F")]["predicted_rate"] == pytest.approx(1 / 3)
    assert by[("sex", "M")]["favourable_rate"] == pytest.approx(4 / 5) and by[("sex", "M")]["most_favoured"]
    assert by[("sex", "F")]["impact_ratio"] == pytest.approx((1 / 3) / (4 / 5))
    assert by[("sex", "F")]["mean_score"] == pytest.approx(0.5)
    assert by[("sex", "F")]["flagged_fraction"] == pytest.approx(1 / 3)
    inter = by[("sex × race", "M × b")]
    assert inter["count"] == 2 and inter["favourable_rate"] == pytest.approx(0.5)
    assert by[("sex × race", "M × a")]["impact_ratio"] == pytest.approx(1.0)
    rows = group_table(selected, prob, sensitive, favourable=True, min_count=3)
    assert {r["group"]: r["favourable_rate"] for r in rows if r["attribute"] == "sex × race"}["F × b"] is None
    with pytest.raises(InputError, match="rows"):
        group_table(selected[:3], prob, sensitive)


# ----------------------------------------------------------------------------------------- the gate's decomposition
class _LinearProbability(torch.nn.Module):
    """ŷ = 0.5 + w·x, a probability-valued target linear in its inputs (the closed form of every part)."""

    def __init__(self, w):
        super().__init__()
        self.w = torch.nn.Parameter(torch.as_tensor(w, dtype=torch.float32), requires_grad=False)

    def forward(self, x):
        return (0.5 + x @ self.w)[:, None]


def _mediated_frame(n=3000, seed=11):
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    z = rng.normal(size=n)
    return pd.DataFrame({"proxy": (sex + 0.6 * rng.normal(size=n)) / 4, "z": z / 4,
                         "mediator": (z + sex + 0.3 * rng.normal(size=n)) / 4, "sex": np.where(sex == 1, "M", "F")})


def test_check_one_attribute_parts_add_up_to_the_change_and_match_the_linear_closed_form():
    from faux_checks import FeatureSpec
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.policy import Policy

    df = _mediated_frame()
    spec = FeatureSpec.fit(df, ["proxy", "z", "mediator", "sex"], name="direct")
    d = spec.n_features
    names = spec.feature_names
    w = np.zeros(d)
    w[names.index("proxy")] = 0.06
    w[names.index("z")] = 0.01
    w[names.index("mediator")] = 0.04
    w[spec.feature_mask("sex")] = [-0.03, 0.03]                            # reads sex directly (F, M)
    target = _LinearProbability(w)
    policy = Policy.model_validate({
        "protected": "sex", "target_output": "probability", "min_aux_quality": 0.5,
        "faux": {"delta": 0.05, "max_flagged_fraction": 0.05, "admissible": ["mediator"]},
        "aux": {"epochs": 10}, "decision": {"min_group_rows": 50, "aux_seeds": 1}})
    result = check_one_attribute(target, df, policy=policy, feature_spec=spec)
    parts = result.decomposition
    assert parts is not None and list(parts.columns) == ["direct", "proxies", "admissible", "total"]
    ok = parts.dropna()
    assert len(ok) == result.n_individuals - result.n_undefined
    np.testing.assert_allclose(ok[["direct", "proxies", "admissible"]].sum(axis=1), ok["total"], atol=1e-6)
    # the closed form of a linear target: the direct part is w · Δx over sex's columns, exactly ∓ 0.06 (its two
    # encoded columns swap), the admissible part exactly 0 (the mediator never moves)
    np.testing.assert_allclose(np.abs(ok["direct"]), 0.06, atol=1e-6)
    np.testing.assert_allclose(ok["admissible"], 0.0, atol=1e-7)
    # no categorical column but sex: one counterfactual per person, whose |change| is the LIC score itself
    np.testing.assert_allclose(np.abs(ok["total"]), result.scores[ok.index], atol=1e-6)
    men = (df["sex"] == "M").to_numpy()[ok.index]
    assert (ok["direct"][men] < 0).all() and (ok["direct"][~men] > 0).all()
    # the proxy part: w_proxy times the proxy's move (the move is by the matched value in the other group)
    assert (np.sign(ok["proxies"][men]) <= 0).mean() > 0.95
    # reasons of the most affected: one list per part, the proxy named in its part
    top = result.top_flagged[0]
    assert [r["part"] for r in top["reasons"]] == ["direct", "proxies", "admissible"]
    assert top["reasons"][1]["columns"][0]["column"] == "proxy"
    assert top["reasons"][2]["columns"] == []
    assert sum(top["parts"][k] for k in ("direct", "proxies", "admissible")) == pytest.approx(top["parts"]["total"],
                                                                                               abs=1e-6)
    summary = result.to_dict()["decomposition_summary"]
    assert summary["over"] == "flagged" and summary["admissible"]["mean_abs"] == pytest.approx(0.0, abs=1e-7)


def test_a_target_without_c_s_columns_has_a_direct_part_of_exactly_zero():
    from faux_checks import FeatureSpec
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.policy import Policy

    df = _mediated_frame(seed=12)
    spec = FeatureSpec.fit(df, ["proxy", "z", "mediator"], name="indirect")
    target = _LinearProbability([0.06, 0.01, 0.04])
    policy = Policy.model_validate({
        "protected": "sex", "target_output": "probability", "min_aux_quality": 0.5,
        "faux": {"delta": 0.05, "max_flagged_fraction": 0.05}, "aux": {"epochs": 10},
        "decision": {"min_group_rows": 50, "aux_seeds": 1}})
    result = check_one_attribute(target, df, policy=policy, feature_spec=spec)
    ok = result.decomposition.dropna()
    assert (ok["direct"] == 0.0).all()
    np.testing.assert_allclose(ok["proxies"] + ok["admissible"], ok["total"], atol=1e-6)
    assert (ok["admissible"] == 0.0).all()                                 # nothing declared admissible: all proxies


def test_the_check_s_group_table_counts_match_the_audit_rows():
    from faux_checks import FeatureSpec
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.policy import Policy

    df = _mediated_frame(n=2000, seed=13)
    df.loc[:9, "sex"] = None                                               # ten rows of unknown sex: not audited
    spec = FeatureSpec.fit(df, ["proxy", "z", "mediator"], name="indirect")
    target = _LinearProbability([0.06, 0.01, 0.04])
    policy = Policy.model_validate({
        "protected": "sex", "target_output": "probability", "min_aux_quality": 0.5, "missing_protected": "drop",
        "favourable_label": "1", "faux": {"delta": 0.05, "max_flagged_fraction": 0.05}, "aux": {"epochs": 5},
        "decision": {"min_group_rows": 50, "aux_seeds": 1}})
    result = check_one_attribute(target, df, policy=policy, feature_spec=spec)
    table = {r["group"]: r for r in result.to_dict()["group_table"]}
    audited = df.iloc[10:]
    p = 0.5 + spec.encode(audited) @ np.array([0.06, 0.01, 0.04])
    for g in ("F", "M"):
        rows = (audited["sex"] == g).to_numpy()
        assert table[g]["count"] == rows.sum()
        assert table[g]["favourable_rate"] == pytest.approx(np.mean(p[rows] > 0.5), abs=1e-9)
        assert table[g]["mean_score"] == pytest.approx(p[rows].mean(), abs=1e-5)
    best = max(table["F"]["favourable_rate"], table["M"]["favourable_rate"])
    assert table["F"]["impact_ratio"] == pytest.approx(table["F"]["favourable_rate"] / best)
    assert table["(unknown: not audited)"]["count"] == 10
