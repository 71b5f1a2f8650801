"""Prefect's temporary server starts within a bound that follows --deadline, and an expiry is exit 2 with one line
naming the setting and PREFECT_API_URL (faux_checks_app.prefect_start)."""

from __future__ import annotations

import pytest
from _support import FAIR, POLICY, linear, make_data

SETTING = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"


def test_startup_timeout_follows_the_deadline_unless_the_user_set_it(monkeypatch):
    from faux_checks.settings import EPHEMERAL_STARTUP_S, configure_environment
    from faux_checks_app.prefect_start import MIN_STARTUP_S, PrefectStartError, startup_timeout

    monkeypatch.delenv(SETTING, raising=False)
    configure_environment()                      # its own default is not the user's
    assert EPHEMERAL_STARTUP_S == MIN_STARTUP_S == 300
    assert startup_timeout(3000.0) == (3000, "from the deadline")
    assert startup_timeout(59.2) == (60, "from the deadline")
    assert startup_timeout(None) == (300, "faux-checks' default for a command without a deadline")
    monkeypatch.setenv(SETTING, "45")
    assert startup_timeout(3000.0) == (45, "set in the environment")
    monkeypatch.setenv(SETTING, "soon")
    with pytest.raises(PrefectStartError, match=f"{SETTING}='soon' is not a positive number of seconds"):
        startup_timeout(3000.0)


@pytest.fixture
def registered(tmp_path):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    make_data(400).to_csv(tmp_path / "gate.csv", index=False)
    (tmp_path / "p.toml").write_text(POLICY)
    save_torchscript(linear(FAIR), tmp_path / "fair.pt")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    Registry(uri).register_version("m", tmp_path / "fair.pt")
    return tmp_path, uri


@pytest.mark.parametrize("how", ["prefect timeout", "deadline"])
def test_a_server_that_does_not_start_is_exit_2_naming_the_setting(registered, how, capfd, monkeypatch):
    from prefect.server.api.server import SubprocessASGIServer

    from faux_checks_app.cli import main
    from faux_checks_app.lifecycle import Stop

    folder, uri = registered
    monkeypatch.delenv(SETTING, raising=False)            # the start-up timeout follows --deadline
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(SubprocessASGIServer, "_instances", {})   # a server of an earlier test is not reused
    given = []

    def start(self, timeout=None):
        given.append(timeout)
        if how == "deadline":
            raise Stop(2, "the gate's deadline of 1234 s was reached")
        raise RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server. Ephemeral server "
                           "process exited with code 1.")
    monkeypatch.setattr(SubprocessASGIServer, "start", start)
    capfd.readouterr()
    code = main(["gate", "m", "--data", str(folder / "gate.csv"), "--policy", str(folder / "p.toml"),
                 "--tracking-uri", uri, "--deadline", "1234"])
    err = [ln for ln in capfd.readouterr().err.splitlines() if SETTING in ln]
    assert code == 2
    assert len(given) == 1 and 1200 <= given[0] <= 1234            # the deadline less the seconds already spent
    (line,) = err
    cause = ("Timed out while attempting to connect to ephemeral Prefect API server." if how == "prefect timeout"
             else "the gate's deadline of 1234 s was reached")
    assert (f"Prefect's temporary API server did not start within {given[0]} s ({SETTING}={given[0]}, from the "
            f"deadline): {cause}; no flow ran. Fix: raise {SETTING} (or --deadline), or set PREFECT_API_URL to the "
            "API of a running Prefect server") in line
    assert line.startswith("faux-checks: could not decide: " if how == "prefect timeout" else "faux-checks: ")


@pytest.mark.parametrize("fails", [False, True])
def test_a_background_start_runs_off_the_callers_thread_and_wait_raises_its_error(fails, monkeypatch):
    import threading

    from prefect.server.api.server import SubprocessASGIServer

    from faux_checks_app import lifecycle
    from faux_checks_app.prefect_start import BackgroundStart, PrefectStartError

    monkeypatch.delenv(SETTING, raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(SubprocessASGIServer, "_instances", {})
    monkeypatch.setattr(lifecycle, "guard_temporary_server", lambda say=print: True)
    threads, release = [], threading.Event()

    def start(self, timeout=None):
        threads.append((threading.current_thread(), timeout))
        release.wait(10)
        if fails:
            raise RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server.")
        self.running = True
    monkeypatch.setattr(SubprocessASGIServer, "start", start)
    server = BackgroundStart()
    release.set()                                  # the start was waiting while this thread went on
    if fails:
        with pytest.raises(PrefectStartError, match=f"did not start within 300 s \\({SETTING}=300, faux-checks' "
                                                    "default for a command without a deadline\\)"):
            server.wait()
    else:
        server.wait()
        assert SubprocessASGIServer().running
    ((thread, timeout),) = threads
    assert thread is not threading.main_thread() and timeout == 300
