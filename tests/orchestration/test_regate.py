"""Re-gating a decided version under a changed policy: ``gate NAME --version N --force``."""

from __future__ import annotations

import pytest
from _support import POLICY, linear, make_data

pytestmark = pytest.mark.slow

SLIGHT = [1.0, 0.0, 0.0, 0.0, 0.2]  # the proxy moves the logit by ≈0.4 between groups: |Δp| ≤ 0.1


def test_regate_records_new_delta_policy_and_moves_the_alias(tmp_path, harness, capfd):
    from faux_checks.gate.policy import load_policy
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = Registry(uri)
    save_torchscript(linear(SLIGHT), tmp_path / "model.pt")
    v = reg.register_version("m", tmp_path / "model.pt")
    data = tmp_path / "audit.csv"
    make_data(800).to_csv(data, index=False)
    lenient = tmp_path / "lenient.toml"   # |Δp| ≤ 0.1 < δ: nobody flagged
    lenient.write_text(POLICY.replace("delta = 0.05", "delta = 0.2"))
    strict = tmp_path / "strict.toml"     # most rows have |Δp| > 0.05
    strict.write_text(POLICY)
    common = ["--data", str(data), "--tracking-uri", uri, "--report-dir", str(tmp_path / "reports")]

    assert main(["gate", "m", "--policy", str(lenient), *common]) == 0
    first = reg.history("m")[0]
    assert first["fairness_gate"] == "passed" and reg.alias_version("m", "deployable") == v
    assert first["fairness_delta"] == "0.2" and first["fairness_policy_sha256"] == load_policy(lenient).sha256()

    # an already decided version is re-decided only with --force; nothing changes without it
    assert main(["gate", "m", "--policy", str(strict), "--version", v, *common]) == 2
    assert "already decided: passed" in capfd.readouterr().err
    assert reg.history("m")[0]["fairness_checked_at"] == first["fairness_checked_at"]

    assert main(["gate", "m", "--policy", str(strict), "--version", v, "--force", *common]) == 1
    row = reg.history("m")[0]
    assert row["fairness_gate"] == "failed" and row["fairness_delta"] == "0.05"
    assert row["fairness_policy_sha256"] == load_policy(strict).sha256() != first["fairness_policy_sha256"]
    assert row["fairness_checked_at"] >= first["fairness_checked_at"] and row["fairness_run_id"] != first["fairness_run_id"]
    assert float(row["fairness_flagged_fraction_lower"]) > 0.5
    assert row["fairness_previous_gate"] == (f"passed at {first['fairness_checked_at']} (δ=0.2, policy "
                                             f"{first['fairness_policy_sha256'][:12]})")
    assert reg.alias_version("m", "deployable") is None and row["fairness_demoted_alias"] == "deployable"
    assert reg.new_versions("m") == []

    capfd.readouterr()
    assert main(["history", "m", "--tracking-uri", uri]) == 0
    header, _, line = capfd.readouterr().out.splitlines()[:3]
    cells = dict(zip([h.strip() for h in header.split("|")], [c.strip() for c in line.split("|")], strict=False))
    assert (cells["decision"], cells["δ"], cells["policy"]) == ("failed", "0.05", row["fairness_policy_sha256"][:12])
    assert cells["decided at"] == row["fairness_checked_at"]
