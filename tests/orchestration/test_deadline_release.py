"""The deadline is a hard bound, the lease release included.

With the MLflow server frozen, a lease release that makes one more slow registry call after the deadline would
take ``gate --deadline 75`` to 121 s. The release runs for at most ``RELEASE_TIMEOUT_S``; a lease left behind
expires on its own. No wall clock is asserted: the test proves the command returned while the registry call of
the release was still blocked (it blocks until the test lets it go).
"""

from __future__ import annotations

import threading

import pytest

from _support import FAIR, linear, make_data, write_policy


@pytest.fixture
def frozen(tmp_path, harness, monkeypatch):
    """A registered version, and a registry that freezes once the gate holds the lease."""
    import faux_checks.registry.operations as ops
    import faux_checks_flows.gate_per_version as gate_flow
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    make_data(200).to_csv(tmp_path / "d.csv", index=False)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    version = registry.register_version("frozen", save_torchscript(linear(FAIR), tmp_path / "m.pt"))
    thaw = threading.Event()
    seen = {"gated": 0, "release_reads": 0}
    real_read = ops.read_lease

    def gate_hangs(*args, **kwargs):          # the registry froze mid-gate: the call never answers
        seen["gated"] += 1
        thaw.wait()

    def read_hangs(registry_, name, v):       # ... and the release's first call hangs too
        if seen["gated"]:
            seen["release_reads"] += 1
            thaw.wait()
        return real_read(registry_, name, v)

    monkeypatch.setattr(gate_flow, "gate_version", gate_hangs)
    monkeypatch.setattr(ops, "read_lease", read_hangs)
    monkeypatch.setattr(ops, "RELEASE_TIMEOUT_S", 0.5)
    yield {"tmp": tmp_path, "uri": uri, "registry": registry, "version": version, "thaw": thaw, "seen": seen,
           "real_read": real_read}
    thaw.set()


@pytest.mark.slow
def test_a_frozen_registry_after_the_deadline_does_not_hold_the_command(frozen, capsys):
    from faux_checks_app.cli import main

    tmp = frozen["tmp"]
    code = main(["gate", "frozen", "--data", str(tmp / "d.csv"), "--policy", str(write_policy(tmp / "p.toml")),
                 "--tracking-uri", frozen["uri"], "--report-dir", str(tmp / "reports"), "--deadline", "20"])
    released_in_time = frozen["thaw"].is_set()
    err = capsys.readouterr().err
    assert code == 2 and "the gate's deadline of 20 s was reached" in err
    assert frozen["seen"] == {"gated": 1, "release_reads": 1}   # the release was tried ...
    assert not released_in_time                                   # ... and the command ended while it still hung
    lease = frozen["real_read"](frozen["registry"], "frozen", frozen["version"])
    assert lease is not None and not lease.live(now=lease.expires_at)   # left in place, expiring by itself
    assert frozen["registry"].new_versions("frozen") == [frozen["version"]]   # nothing decided: gated next run
