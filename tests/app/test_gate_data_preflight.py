"""``faux-checks gate`` judges the audit data with the policy before the registry is asked anything: a data error is
exit 3, one line naming every offending column, with no registry call, no model download and no Prefect."""

from __future__ import annotations

import numpy as np
import pytest
from _support import FAIR, linear, make_data


@pytest.fixture
def files(tmp_path):
    """A registered version and data with a text label, 2 missing protected values and 4 missing admissible values."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    frame = make_data(400)
    frame["y"] = np.where(frame["y"] == 1, "deny", "approve")
    frame.loc[[5, 7], "sex"] = np.nan
    frame.loc[10:13, "f2"] = np.nan
    frame.to_csv(tmp_path / "gate.csv", index=False)
    (tmp_path / "p.toml").write_text('protected = "sex"\nlabel = "y"\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n'
                                     'admissible = ["f2"]\n')
    save_torchscript(linear(FAIR), tmp_path / "fair.pt")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    Registry(uri).register_version("m", tmp_path / "fair.pt")
    return tmp_path, uri


def test_a_data_error_is_exit_3_before_any_registry_call(files, capfd, monkeypatch):
    import faux_checks.registry as registry
    import faux_checks.settings as settings
    from faux_checks_app.cli import main

    folder, uri = files
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("the registry was asked before the data was judged")
    monkeypatch.setattr(registry.Registry, "__init__", refuse)
    monkeypatch.setattr(registry.Registry, "download", refuse)
    monkeypatch.setattr(settings, "configure_environment", refuse)    # Prefect's first step
    capfd.readouterr()
    code = main(["gate", "m", "--data", str(folder / "gate.csv"), "--policy", str(folder / "p.toml"),
                 "--tracking-uri", uri])
    err = capfd.readouterr().err.strip().splitlines()
    assert (code, calls) == (3, [])
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"faux-checks gate: configuration error: {folder / 'gate.csv'} (400 rows) does not fit the "
                           f"policy {folder / 'p.toml'}: 3 problem(s): (1) the label column 'y' holds text")
    assert "(2) protected attribute 'sex' has 2 missing values in 400 rows" in line
    assert "(3) missing values in 1 input column(s): 'f2' (4 of 398 rows)" in line
    assert line.endswith("no model was downloaded and nothing was recorded")
