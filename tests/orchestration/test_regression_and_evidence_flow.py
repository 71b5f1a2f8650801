"""Through the Prefect gate flow: who a new version harms (per individual, against the deployed and the previous
version, the no-new-harm rule) and the evidence pack a reviewer verifies.

- Adult demo v1 then v2 on 3,000 audit rows: v2's report counts newly flagged / resolved / still flagged exactly as a
  direct row-by-row comparison of the two versions' ``records/scores.parquet``, with the exact paired interval;
  the history carries the churn.
- A constructed pair at an unchanged flagged fraction (~25%) that swaps who is harmed (the proxy is read only for
  f1 > q75 in v1, only for f1 < q25 in v2): the absolute rule passes both, the no-new-harm rule fails v2; the same
  model again (v3) passes it and takes the alias.
- ``faux-checks verify`` accepts a signed pack of a real gate run and refuses it after one byte of the audit data or
  of the policy changes (and with another signer's key).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _support import ProxyWhere, make_data

pytestmark = pytest.mark.slow


def _report(history_row: dict) -> dict:
    return json.loads(Path(history_row["fairness_report"]).with_name("report.json").read_text())


def _flags(path: Path) -> pd.Series:
    """A scores record's flags by row, read directly (undefined = flagged, not audited left out)."""
    s = pd.read_parquet(path)
    s = s[s["status"] != "not_audited"]
    col = "flag_probability" if "flag_probability" in s.columns else "flagged"
    f = s[col].astype("float64").clip(0, 1).where(s["status"] != "undefined", 1.0)
    return pd.Series(f.to_numpy(), index=s["row"].to_numpy())


@pytest.fixture(scope="module")
def adult(tmp_path_factory, harness):
    """Adult demo v1 and v2 (3 epochs), registered, gated in one run on 3,000 audit rows, with a signing key."""
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main
    from faux_checks_app.demo import build_demo_versions
    from faux_checks_flows.gate import gate

    d = tmp_path_factory.mktemp("adult")
    versions = {v.name: v for v in build_demo_versions(d / "models", seed=0, epochs=3)}
    audit = pd.read_csv(versions["v1"].audit_path).sample(3000, random_state=0).reset_index(drop=True)
    data = d / "audit.csv"
    audit.to_csv(data, index=False)
    policy = d / "policy.toml"
    shipped = Path(__file__).resolve().parents[2] / "faux_checks" / "gate" / "policies" / "adult.toml"
    text = shipped.read_text().replace("\naux_seeds = 3\n", "\naux_seeds = 1\n", 1)
    assert "\naux_seeds = 1\n" in text
    policy.write_text(text)
    assert main(["keygen", str(d / "signer.pem")]) == 0
    uri = f"sqlite:///{d}/mlflow.db"
    reg = Registry(uri)
    numbers = {name: reg.register_version("adult", versions[name].model_path, feature_spec_path=versions[name].spec_path)
               for name in ("v1", "v2")}
    gate(model_name="adult", data_path=str(data), policy_path=str(policy), tracking_uri=uri,
         report_root=str(d / "reports"), signing_key=str(d / "signer.pem"), return_state=True)
    history = {r["version"]: r for r in reg.history("adult")}
    return {"dir": d, "data": data, "policy": policy, "history": history, "numbers": numbers, "uri": uri}


def test_v2_against_v1_matches_a_direct_comparison_of_the_score_files(adult):
    from faux_checks.gate.bounds import clopper_pearson

    h, n = adult["history"], adult["numbers"]
    r1, r2 = h[n["v1"]], h[n["v2"]]
    assert r1["fairness_gate"] == "failed" and r2["fairness_gate"] == "failed"   # demo: both unfair, no alias
    report = _report(r2)
    by_role = {c["role"]: c for c in report["regression"]}
    assert by_role["deployed"]["compared_with"] is None and by_role["deployed"]["rule"] is None
    previous = by_role["previous"]
    assert previous["compared_with"] == n["v1"]
    f1 = _flags(Path(r1["fairness_report"]).parent / "records" / "scores.parquet")
    f2 = _flags(Path(r2["fairness_report"]).parent / "records" / "scores.parquet")
    rows = f1.index.intersection(f2.index)
    p0, p1 = f1.loc[rows].to_numpy(), f2.loc[rows].to_numpy()
    change = previous["change"]
    assert change["n"] == len(rows) == 3000
    assert change["newly_flagged"] == pytest.approx(float((p1 * (1 - p0)).sum()), abs=1e-9)
    assert change["resolved"] == pytest.approx(float((p0 * (1 - p1)).sum()), abs=1e-9)
    assert change["still_flagged"] == pytest.approx(float((p0 * p1).sum()), abs=1e-9)
    assert change["change"] == pytest.approx(float(p1.mean() - p0.mean()), abs=1e-12)
    # the decision rounds each version's expected count to a whole person: the same change within 1/n
    assert change["change"] == pytest.approx(report["check"]["flagged_fraction"] - _report(r1)["check"]["flagged_fraction"],
                                             abs=1 / 3000)
    b, c = round(change["newly_flagged"]), round(change["resolved"])
    lo, hi = clopper_pearson(b, b + c, 0.95)
    assert change["change_interval"] == pytest.approx([(b + c) * (2 * lo - 1) / 3000, (b + c) * (2 * hi - 1) / 3000])
    assert change["change_interval"][0] > 0      # v2 (biased labels) flags more people than v1, beyond chance
    groups = {g["group"]: g for g in change["by_group"]}
    assert set(groups) == {"Female", "Male"} and sum(g["n"] for g in groups.values()) == 3000
    assert r2["fairness_churn_against"] == n["v1"]
    assert float(r2["fairness_churn_newly_flagged"]) == pytest.approx(change["newly_flagged"])
    point = [p for p in report["history"] if p.get("this_run")][0]
    assert point["churn"]["against"] == n["v1"]
    html = (Path(r2["fairness_report"]).parent / "report.html").read_text()
    assert "Against earlier versions" in html and "Did the test have power?" in html


def test_verify_accepts_the_gate_pack_and_refuses_one_changed_byte(adult):
    from faux_checks_app.cli import main

    d, row = adult["dir"], adult["history"][adult["numbers"]["v2"]]
    folder = Path(row["fairness_report"]).parent
    pack = folder / "evidence.json"
    payload = json.loads(pack.read_text())
    roles = set(payload["evidence"]["files"])
    assert {"model", "spec", "data", "report", "records/scores.parquet", "records/policy.toml"} <= roles
    assert payload["evidence"]["decision"] == "failed" and payload["signature"]["algorithm"] == "Ed25519"
    assert row["fairness_evidence_signed"] == "true" and row["fairness_evidence_uri"].endswith("/evidence.json")
    model_file = payload["evidence"]["files"]["model"]["path"]     # the gate's download folder is gone: say where
    assert not Path(model_file).exists()
    from faux_checks.registry import Registry

    model_now, spec_now = Registry(adult["uri"]).download("adult", adult["numbers"]["v2"], d / "reviewer")
    where = ["--file", f"model={model_now}", "--file", f"spec={spec_now}"]
    pub = str(d / "signer.pem.pub")
    assert main(["verify", str(pack), "--public-key", pub, *where]) == 0
    assert main(["verify", str(pack), *where]) == 1                      # integrity only: the signer not pinned
    assert main(["verify", str(pack), "--trust-embedded-key", *where]) == 0   # accepted as such, explicitly
    assert main(["verify", str(pack), "--public-key", pub]) == 1         # the model not where it was: missing

    for target in (adult["data"], folder / "records" / "policy.toml"):
        original = target.read_bytes()
        target.write_bytes(original[:-2] + bytes([original[-2] ^ 1]) + original[-1:])
        try:
            assert main(["verify", str(pack), "--public-key", pub, *where]) == 1
        finally:
            target.write_bytes(original)
    assert main(["verify", str(pack), "--public-key", pub, *where]) == 0

    assert main(["keygen", str(d / "other.pem")]) == 0                   # another signer's key is refused
    assert main(["verify", str(pack), "--public-key", str(d / "other.pem.pub"), *where]) == 1
    edited = json.loads(pack.read_text())                                # and an edited decision
    edited["evidence"]["decision"] = "passed"
    forged = d / "forged"
    forged.mkdir()
    (forged / "evidence.json").write_text(json.dumps(edited))
    assert main(["verify", str(forged / "evidence.json"), *where, "--file", f"data={adult['data']}"]) == 1


def test_no_new_harm_fails_a_version_that_swaps_who_is_harmed(tmp_path, harness):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    frame = make_data(1200, seed=3)
    data = tmp_path / "audit.csv"
    frame.to_csv(data, index=False)
    t = float(np.quantile(frame["f1"], 0.75))
    save_torchscript(ProxyWhere(1.0, t), tmp_path / "v1.pt")       # harms f1 > q75
    save_torchscript(ProxyWhere(-1.0, t), tmp_path / "v2.pt")      # harms f1 < q25: other people, same share
    policy = tmp_path / "policy.toml"
    policy.write_text('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\n'
                      'max_flagged_fraction = 0.4\n[aux]\nepochs = 30\n[decision]\nmin_group_rows = 20\naux_seeds = 1\n'
                      'max_newly_flagged_fraction = 0.05\n')
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = Registry(uri)
    v1 = reg.register_version("m", tmp_path / "v1.pt")
    v2 = reg.register_version("m", tmp_path / "v2.pt")
    v3 = reg.register_version("m", tmp_path / "v1.pt")               # v1 again: nobody newly harmed
    gate(model_name="m", data_path=str(data), policy_path=str(policy), tracking_uri=uri,
         report_root=str(tmp_path / "reports"), return_state=True)
    h = {r["version"]: r for r in reg.history("m")}
    assert h[v1]["fairness_gate"] == "passed"
    ff1, ff2 = (float(h[v]["fairness_flagged_fraction"]) for v in (v1, v2))
    assert 0.2 < ff1 < 0.3 and abs(ff2 - ff1) < 0.04                 # an unchanged flagged fraction
    report = _report(h[v2])
    assert h[v2]["fairness_gate"] == "failed"
    statuses = {r["rule"]: r["status"] for r in report["rules"]}
    assert statuses["max_newly_flagged_fraction"] == "exceeded"
    assert all(s == "ok" for rule, s in statuses.items() if rule != "max_newly_flagged_fraction")
    deployed = next(c for c in report["regression"] if c["role"] == "deployed")
    assert deployed["compared_with"] == v1
    assert deployed["change"]["newly_flagged_fraction"] > 0.2 and deployed["change"]["resolved"] > 0.2 * 1200
    assert abs(deployed["change"]["change"]) < 0.04                  # what an aggregate delta would have shown
    assert "newly flagged" in report["reasons"][0]
    r3 = _report(h[v3])
    assert h[v3]["fairness_gate"] == "passed"
    deployed3 = next(c for c in r3["regression"] if c["role"] == "deployed")
    assert deployed3["compared_with"] == v1 and deployed3["change"]["newly_flagged"] == 0
    assert deployed3["rule"]["status"] == "ok"
    assert reg.alias_version("m", "deployable") == v3
