"""``--deadline`` out of range is a configuration error (exit 3) naming the option, the value and the range."""

from __future__ import annotations

import pytest

from faux_checks_app.cli import main

EXPECTED = ("configuration error: --deadline {value!r} is not a deadline: give the seconds the command may run, a "
            "number greater than 0 and at most 86,400 (24 h; the range of the policy's [operations] deadline_s), "
            "e.g. --deadline 600; nothing was {what}")


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "-inf", "1e300", "86400.5", "abc", ""])
def test_check_deadline_out_of_range_exits_3_before_anything(value, tmp_path, capsys):
    report = tmp_path / "r"
    code = main(["check", "--model", str(tmp_path / "absent.pt"), "--data", str(tmp_path / "absent.csv"),
                 "--protected", "sex", "--report-dir", str(report), f"--deadline={value}"])
    assert code == 3
    assert capsys.readouterr().err.strip() == "faux-checks check: " + EXPECTED.format(value=value, what="written")
    assert not report.exists()                                  # not even an undecided report


@pytest.mark.parametrize("value", ["0", "nan", "1e300", "x"])
def test_gate_deadline_out_of_range_exits_3(value, tmp_path, capsys):
    code = main(["gate", "m", "--data", str(tmp_path / "d.csv"), "--tracking-uri", f"sqlite:///{tmp_path}/m.db",
                 f"--deadline={value}"])
    assert code == 3
    assert EXPECTED.format(value=value, what="recorded") in capsys.readouterr().err


def test_deadline_in_range_is_taken_as_seconds():
    from faux_checks_app.arguments import deadline_seconds

    assert deadline_seconds(None) is None
    assert deadline_seconds("1.5") == 1.5 and deadline_seconds("86400") == 86400.0
