"""Third-party testers found through the ``faux_checks.testers`` entry-point group: one installed package and one
policy line, no edit of this repository.

Each test writes a tiny distribution (a module and its ``.dist-info`` with ``entry_points.txt``) on ``sys.path``, as
``pip install`` would, and validates a policy that names the tester. The plug-in scores each row by |x_0|, so its
flagged fraction has a closed form.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest
from pydantic import ValidationError

from faux_checks.gate.policy import Policy
from faux_checks.gate.tester_table import ENTRY_POINT_GROUP, TESTERS, find_tester

PLUGIN = '''
import numpy as np
from faux_checks.gate.tester_table import Tester

def _scores(call):
    return np.abs(call.audit.X[:, 0]), "|x_0| > threshold"

ABS_FIRST = Tester("{name}", _scores, gx_name="AbsFirst", summary="|x_0| of the audited rows")
NOT_A_TESTER = object()
'''


def _policy(testers: dict) -> Policy:
    return Policy.model_validate({"protected": "sex", "faux": {"delta": 0.1, "max_flagged_fraction": 0.05}, "testers": testers})


@pytest.fixture
def install(tmp_path, monkeypatch):
    """Write a distribution ``faux-plugin`` whose entry points are the given ``name = module:object`` lines."""
    names: list[str] = []

    def write(entries: dict[str, str], *, tester_name: str = "abs_first", module: str = "faux_plugin_mod") -> None:
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(PLUGIN.format(name=tester_name)))
        info = tmp_path / "faux_plugin-0.1.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: faux-plugin\nVersion: 0.1\n")
        lines = "\n".join(f"{k} = {v}" for k, v in entries.items())
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}\n")
        names.extend(entries)
        monkeypatch.syspath_prepend(str(tmp_path))
        sys.modules.pop(module, None)

    yield write
    for name in names:
        TESTERS.pop(name, None)


def test_a_policy_line_finds_an_installed_tester(install):
    install({"abs_first": "faux_plugin_mod:ABS_FIRST"})
    assert "abs_first" not in TESTERS
    policy = _policy({"abs_first": {"threshold": 0.5}})
    assert policy.testers["abs_first"].threshold == 0.5
    tester = TESTERS["abs_first"]                       # registered: the check and the GX suite see it
    assert (tester.gx_name, tester.per_individual) == ("AbsFirst", True)

    class Audit:
        X = np.array([[0.2, 9.0], [-0.7, 0.0], [1.5, 1.0]])
    scores, rule = tester.scores(type("Call", (), {"audit": Audit})())
    assert np.array_equal(scores, [0.2, 0.7, 1.5]) and rule == "|x_0| > threshold"
    assert np.mean(scores > 0.5) == pytest.approx(2 / 3)


def test_unknown_names_stay_refused_and_name_the_group(install):
    install({"abs_first": "faux_plugin_mod:ABS_FIRST"})
    with pytest.raises(ValidationError, match=r"unknown tester\(s\) \['nope'\].*'faux_checks.testers' entry points"):
        _policy({"nope": {"threshold": 1.0}})
    assert find_tester("nope") is None and "abs_first" not in TESTERS   # only the names a policy uses are loaded


@pytest.mark.parametrize(("entry", "tester_name", "message"), [
    ("faux_plugin_mod:NOT_A_TESTER", "abs_first", "is a object, expected a faux_checks.gate.tester_table.Tester"),
    ("faux_plugin_mod:MISSING", "abs_first", "failed to load: AttributeError"),
    ("faux_plugin_mod:ABS_FIRST", "other_name", "holds the tester 'other_name'"),
])
def test_a_broken_plugin_is_named(install, entry, tester_name, message):
    install({"abs_first": entry}, tester_name=tester_name)
    with pytest.raises(ValidationError) as info:
        _policy({"abs_first": {"threshold": 1.0}})
    text = str(info.value)
    assert message in text and "entry point abs_first" in text and "package faux-plugin 0.1" in text
    assert "abs_first" not in TESTERS
