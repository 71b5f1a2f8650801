"""Decimal commas and thousands marks: read as the file writes them, or refused; never misread, never dropped.

The cases: a ';'-separated file of decimal commas (``0,189``) reads with the sniffed decimal comma and gets the
plain file's decision; ``--thousands ','`` on it, or on ``12,34``, is refused naming the columns; a proxy column
written with decimal commas is read as numbers (sniffed or ``--decimal ','``) or refused naming it, and never
leaves the model's inputs so that the next column takes its place.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import _support
from _support import UNFAIR
from faux_checks import FeatureSpec, InputError
from faux_checks.gate.stream.source import DataSource
from faux_checks.inputs.io import read_table
from faux_checks.inputs.number_marks import comma_reading, sniff_decimal
from faux_checks_app.cli import main



@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from faux_checks.inputs.models import save_torchscript

    d = tmp_path_factory.mktemp("marks")
    data = _support.make_data(400)
    data.insert(5, "noise", np.random.default_rng(3).normal(size=len(data)))
    data.to_csv(d / "plain.csv", index=False)
    data.to_csv(d / "decimal.csv", index=False, sep=";", decimal=",")           # 0,189 ; -1,2345 ; ...
    # whole numbers everywhere but the proxy, written with one decimal: '-1,6', '2,4'
    # (the shape of '-162,4': one digit after a decimal comma)
    whole = data.assign(**{c: np.round(data[c] * 2) for c in ["f0", "f1", "f2", "f3", "noise"]},
                        proxy=np.round(data["proxy"], 1)).astype({c: int for c in ["f0", "f1", "f2", "f3", "noise"]})
    whole.to_csv(d / "whole.csv", index=False)
    whole.to_csv(d / "whole_comma.csv", index=False, sep=";", decimal=",")
    whole.to_csv(d / "whole_quoted.csv", index=False, decimal=",")               # ','-separated: "-1,6" quoted
    return {"dir": d, "data": data, "whole_frame": whole, **{k: d / f"{k}.csv" for k in
                                                      ["plain", "decimal", "whole", "whole_comma", "whole_quoted"]},
            "unfair": save_torchscript(_support.FirstInputs(UNFAIR), d / "unfair.pt"),
            "policy": _support.write_policy(d / "policy.toml")}


def _check(files, data, *extra) -> list[str]:
    return ["check", "--model", str(files["unfair"]), "--data", str(data), "--policy", str(files["policy"]), "-q",
            *extra]


def test_comma_readings():
    assert [comma_reading(v) for v in ["0,189", "12,34", "-162,4", "1234,5", "1.234,5"]] == ["decimal"] * 5
    assert [comma_reading(v) for v in ["1,234.5", "1,234,567", "-12,345.0"]] == ["thousands"] * 3
    assert [comma_reading(v) for v in ["1,234", "-999,000"]] == ["either"] * 2
    assert [comma_reading(v) for v in ["a,b", "1,2,3", "1.5", 1.5, None]] == [None] * 5
    assert sniff_decimal("a;b\n0,189;1\n1,234;2\n", ";") == ","
    assert sniff_decimal("a;b\n1,234;1\n", ";") is None                              # 1234 or 1.234: not guessed
    assert sniff_decimal("a;b\n0,189;1,234.5\n", ";") is None                        # both conventions: not guessed
    assert sniff_decimal('a,b\n"0,189",1\n', ",") is None                            # ','-separated: never sniffed


def test_decimal_comma_file_reads_as_the_plain_one_with_the_same_decision(files, capsys):
    frame = read_table(files["decimal"])
    pd.testing.assert_frame_equal(frame, read_table(files["plain"]), check_exact=False, rtol=1e-15)
    assert DataSource.open(files["decimal"]).decimal == ","
    assert main(_check(files, files["plain"])) == 1
    plain = capsys.readouterr().out
    assert "failed:" in plain
    assert main(_check(files, files["decimal"])) == 1
    assert capsys.readouterr().out == plain                                          # same flagged fraction, lines
    assert main(_check(files, files["decimal"], "--decimal", ",")) == 1
    assert capsys.readouterr().out == plain


def test_thousands_mark_on_decimal_commas_is_refused_naming_every_column(files, capsys):
    """``--thousands ','`` would read '-0,4736…' as -4736…: refused with the columns, counts and first rows."""
    with pytest.raises(InputError) as info:
        read_table(files["decimal"], thousands=",")
    text = str(info.value)
    assert text.startswith(f"data file {files['decimal']}: --thousands ',' would misread numbers whose ',' is not "
                           "followed by groups of exactly 3 digits (a thousands mark is: 1,234.5): column 'f0' has "
                           "400 such values (e.g. '"), text
    for col in ["f0", "f1", "f2", "f3", "proxy", "noise"]:
        assert f"column '{col}' has 400 such values (e.g. " in text
    assert "they read as decimal commas: read the file with --decimal ',' instead" in text
    assert main(_check(files, files["decimal"], "--thousands", ",")) == 2
    err = capsys.readouterr().err
    assert "--thousands ',' would misread numbers" in err and "nothing was scored" in err
    assert main(_check(files, files["decimal"], "--thousands", ",", "--decimal", ",")) == 2
    assert "are the same mark" in capsys.readouterr().err


def test_thousands_mark_on_12_34_is_refused_with_column_count_and_row(tmp_path, files):
    path = tmp_path / "groups.csv"
    path.write_text('a;b;c\n1,234.5;1;x\n12,34;2;y\n"1,2,3";3;z\n5;4;w\n12,345;5;v\n')
    with pytest.raises(InputError, match=r": column 'a' has 2 such values \(e.g. '12,34' in row 1\); write the "
                                         r"numbers plainly \(1234.5\) or give the mark they use\."):
        read_table(path, thousands=",")
    good = tmp_path / "good.csv"
    good.write_text('a;b\n1,234.5;1\n12,345;2\n-1,000,000;3\n7;4\n')
    assert read_table(good, thousands=",")["a"].tolist() == [1234.5, 12345.0, -1000000.0, 7.0]
    # the streaming scorer checks the same marks before it scores
    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.stream.run import score_stream

    bad = files["whole_frame"].astype({"f2": object})
    bad.loc[[5, 9], "f2"] = ["12,34", "0,5"]
    bad.to_csv(tmp_path / "stream.csv", index=False, sep=";")
    with pytest.raises(InputError, match=r"column 'f2' has 2 such values \(e.g. '12,34' in row 5\); they read as "
                                         r"decimal commas"):
        score_stream(torch.jit.load(str(files["unfair"])), tmp_path / "stream.csv", policy=load_policy(files["policy"]),
                     out_path=tmp_path / "s.parquet", chunk_rows=100, thousands=",")
    assert not (tmp_path / "s.parquet").exists()


def test_proxy_with_decimal_commas_is_never_dropped(files, capsys):
    """The proxy written '-1,6': read as numbers (sniffed), and the unfair model fails as on the plain file."""
    assert read_table(files["whole_comma"])["proxy"].tolist() == files["whole_frame"]["proxy"].tolist()
    spec = FeatureSpec.passthrough(read_table(files["whole_comma"]), exclude=["sex", "y"])
    assert spec.source_columns == ["f0", "f1", "f2", "f3", "proxy", "noise"]           # the proxy is an input
    assert main(_check(files, files["whole"])) == 1
    plain = capsys.readouterr().out
    assert "failed:" in plain
    assert main(_check(files, files["whole_comma"])) == 1
    assert capsys.readouterr().out == plain


def test_quoted_decimal_commas_are_refused_naming_the_column_then_read_with_decimal(files, capsys):
    """','-separated with "-1,6" quoted: not sniffed, so refused naming the proxy and --decimal ','; then read."""
    assert main(_check(files, files["whole_quoted"])) == 2
    err = capsys.readouterr().err
    assert "column 'proxy' is read as text: " in err and "written with a decimal comma: read it with --decimal ','" in err
    assert "--thousands" not in err.split("Without a feature spec")[0]             # no hint that would misread
    assert main(_check(files, files["whole"])) == 1
    plain = capsys.readouterr().out
    assert main(_check(files, files["whole_quoted"], "--decimal", ",")) == 1
    assert capsys.readouterr().out == plain


def test_a_proxy_column_of_decimal_commas_is_refused_not_dropped_in_a_frame():
    """In a DataFrame (no file to sniff): '-162,4' is a number written with a decimal comma, never genuine text."""
    frame = pd.DataFrame({"f0": [1.0, 2.0, 3.0], "proxy": ["-162,4", "0,5", "12"], "noise": [0.1, 0.2, 0.3],
                          "sex": list("FMF")})
    with pytest.raises(InputError, match=r"^column 'proxy' is read as text: 2 of its 3 values are not numbers \(e.g. "
                                         r"'-162,4' in row 0, written with a decimal comma: read it with --decimal "
                                         r"','; 1 is a number\)"):
        FeatureSpec.passthrough(frame, exclude=["sex"])
    with pytest.raises(InputError, match=r"written with commas that are thousands marks in some values \(1,234.5\) "
                                         r"and decimal commas in others \(0,5\): write the numbers plainly"):
        FeatureSpec.passthrough(frame.assign(proxy=["1,234.5", "0,5", "12"]), exclude=["sex"])


def test_decimal_mark_that_is_not_one_is_refused(files):
    with pytest.raises(InputError, match=r"^--decimal ';' is not a decimal mark"):
        read_table(files["plain"], decimal=";")
    with pytest.raises(InputError, match=r"^--decimal ',' and --thousands ',' are the same mark"):
        DataSource.open(files["decimal"], decimal=",", thousands=",")
    assert read_table(files["decimal"], decimal=",", thousands=".")["f0"].dtype == np.float64  # 1.234,5 style allowed


def test_streaming_scorer_sniffs_the_decimal_comma_too(files, tmp_path, capsys):
    """score-large in this process: the decimal-comma file scores row for row as the plain file."""
    base = ["score-large", "--model", str(files["unfair"]), "--policy", str(files["policy"]), "--workers", "0"]
    assert main(base + ["--data", str(files["plain"]), "--out", str(tmp_path / "plain.csv")]) == 1
    plain_out = capsys.readouterr().out
    assert main(base + ["--data", str(files["decimal"]), "--out", str(tmp_path / "decimal.csv")]) == 1
    assert capsys.readouterr().out.splitlines()[0] == plain_out.splitlines()[0]
    plain, decimal = pd.read_csv(tmp_path / "plain.csv"), pd.read_csv(tmp_path / "decimal.csv")
    assert len(plain) == 400 and plain["flagged"].sum() > 0
    pd.testing.assert_frame_equal(decimal, plain)
    assert main(base + ["--data", str(files["decimal"]), "--out", str(tmp_path / "t.csv"), "--thousands", ","]) == 2
    assert "--thousands ',' would misread numbers" in capsys.readouterr().err
    assert not (tmp_path / "t.csv").exists()
