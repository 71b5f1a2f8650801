"""What the CLI prints (stdout carries the result only; labels say what is true)."""

from __future__ import annotations

import pytest

from _support import FAIR, linear


def test_register_q_prints_only_the_version_on_stdout(tmp_path, capfd, monkeypatch):
    """With an MLflow server, ending the registration run prints its links on stdout (MLflow's own print);
    simulated here on the sqlite store, which prints none."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    real = Registry.register_version

    def prints_links(self, *args, **kwargs):
        version = real(self, *args, **kwargs)
        print(f"🏃 View run m-v{version} at: http://mlflow.example:5000/#/experiments/1/runs/abc")
        return version

    monkeypatch.setattr(Registry, "register_version", prints_links)
    model = save_torchscript(linear(FAIR), tmp_path / "m.pt")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    capfd.readouterr()
    assert main(["register", "m", "--model", str(model), "--tracking-uri", uri, "-q"]) == 0
    assert main(["register", "m", "--model", str(model), "--tracking-uri", uri, "-q"]) == 0
    out = capfd.readouterr().out
    assert out == "1\n2\n"                      # the run links went to stderr


def test_the_prefect_api_label_names_the_configured_server(monkeypatch):
    import prefect.settings  # noqa: F401 - Prefect's settings read before the variable is set (no API URL in them)
    from faux_checks_app.gate_cli import _prefect_api

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert _prefect_api() == "Prefect ephemeral API; first start takes ~10 s"
    monkeypatch.setenv("PREFECT_API_URL", "http://prefect.example:4200/api")
    assert _prefect_api() == "Prefect API http://prefect.example:4200/api"
    monkeypatch.delenv("PREFECT_API_URL")
    assert _prefect_api() == "Prefect ephemeral API; first start takes ~10 s"


def test_an_unreachable_registry_is_named_with_the_seconds_the_command_ran():
    from faux_checks.errors import RegistryUnreachableError
    from faux_checks_app.gate_cli import _raise_if_unreachable

    class Failed:
        def is_completed(self):
            return False

        def result(self, raise_on_failure=False):
            return ConnectionRefusedError("[Errno 111] Connection refused")

    with pytest.raises(RegistryUnreachableError, match=r"^registry unreachable at http://127.0.0.1:9 for 187.4 s "
                                                       r"\(ConnectionRefusedError: \[Errno 111\] Connection refused\)"):
        _raise_if_unreachable(Failed(), "http://127.0.0.1:9", seconds=187.4)
