"""Misread columns never reach the model: ambiguous headers and numbers written as text.

A repeated header (``f0,f1,f2,f3,f1``) would be read as another column (``f1.1``); without a feature spec, a
column holding one ``"1,234.5"`` would be read as text and left out, shifting every later input by one (an unfair
model would pass, exit 0). Both are refused before anything is scored, naming the column.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import torch

import _support
from _support import FEATURES, UNFAIR
from faux_checks import FeatureSpec, InputError
from faux_checks.gate.stream.source import DataSource
from faux_checks.inputs.io import read_table
from faux_checks_app.cli import main



@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from faux_checks.inputs.models import save_torchscript

    d = tmp_path_factory.mktemp("misread")
    data = _support.make_data(400)
    # a column after the proxy: when one input is dropped, the unfair model's proxy weight lands on it
    # (the unfair model fails on the clean file, 98.75% flagged, and passes at 0% with one column dropped)
    data.insert(5, "noise", np.random.default_rng(3).normal(size=len(data)))
    data.to_csv(d / "clean.csv", index=False)
    lines = (d / "clean.csv").read_text().splitlines()
    header = lines[0].split(",")
    thousands = data.astype({"f2": object})
    thousands.loc[17, "f2"] = "1,234.5"
    thousands.to_csv(d / "thousands.csv", index=False)
    scaled = data.copy()                                               # the thousands file's numbers, written plainly
    scaled.loc[17, "f2"], scaled.loc[90, "f0"] = 1234.5, -2000000.25
    marked = scaled.astype({"f2": object, "f0": object})
    marked.loc[17, "f2"], marked.loc[90, "f0"] = "1,234.5", "-2,000,000.25"
    scaled.to_csv(d / "scaled.csv", index=False, sep=";")
    marked.to_csv(d / "marked.csv", index=False, sep=";")              # ';'-separated: ',' is free to mark thousands
    return {"dir": d, "data": data, "lines": lines, "header": header,
            "clean": d / "clean.csv", "thousands": d / "thousands.csv",
            "scaled": d / "scaled.csv", "marked": d / "marked.csv",
            "unfair": save_torchscript(_support.FirstInputs(UNFAIR), d / "unfair.pt"),
            "policy": _support.write_policy(d / "policy.toml")}


def _with_header(files, path, names) -> str:
    path.write_text("\n".join([",".join(names)] + files["lines"][1:]) + "\n")
    return str(path)


def _check(files, data) -> list[str]:
    return ["check", "--model", str(files["unfair"]), "--data", str(data), "--policy", str(files["policy"]), "-q"]


def test_duplicate_header_is_refused_with_the_names_and_positions(files, tmp_path, capsys):
    names = list(files["header"])
    names[4] = "f1"                                                      # f0,f1,f2,f3,f1,noise,sex,y
    path = _with_header(files, tmp_path / "dup.csv", names)
    expected = (f"data file {path} has ambiguous column names: 'f1' is given 2 times (columns 2 and 5). Every column "
                "needs a unique, non-empty name (a repeated name would be read as another column, e.g. 'x1' as "
                "'x1.1'); rename or remove these columns; nothing was scored")
    with pytest.raises(InputError) as info:
        read_table(path)
    assert str(info.value) == expected
    with pytest.raises(InputError) as streamed:                          # score-large reads the header the same way
        DataSource.open(path)
    assert str(streamed.value) == expected
    assert main(_check(files, path)) == 2
    assert capsys.readouterr().err.strip() == f"faux-checks: could not decide: {expected}"


def test_empty_and_whitespace_ambiguous_names_are_refused(files, tmp_path):
    names = list(files["header"])
    names[2], names[3] = "", "f1 "                                       # f0,f1,,f1 ,proxy,...
    path = _with_header(files, tmp_path / "blank.csv", names)
    with pytest.raises(InputError) as info:
        read_table(path)
    assert str(info.value).startswith(
        f"data file {path} has ambiguous column names: column 3 has an empty name; 'f1' and 'f1 ' differ only by "
        "surrounding whitespace (columns 2 and 4). Every column needs")
    frame = files["data"].rename(columns={"f3": "f0"})                    # an in-memory frame: same rule
    from faux_checks.gate.one_attribute import check_one_attribute
    from faux_checks.gate.policy import load_policy

    with pytest.raises(InputError, match=r"^data has ambiguous column names: 'f0' is given 2 times \(columns 1 and 4\)"):
        check_one_attribute(_support.FirstInputs(UNFAIR), frame, policy=load_policy(files["policy"]))


def test_parquet_header_is_checked_too(files, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table([pa.array([1.0, 2.0]), pa.array([3.0, 4.0])], names=["x", "x"])
    pq.write_table(table, tmp_path / "dup.parquet")
    with pytest.raises(InputError, match=r"has ambiguous column names: 'x' is given 2 times \(columns 1 and 2\)"):
        read_table(tmp_path / "dup.parquet")


def test_a_number_with_a_thousands_separator_is_refused_not_dropped(files, capsys):
    """The unfair model fails on the clean file; with one '1,234.5' in 'f2' it is refused, never passed with 'f2'
    dropped."""
    assert main(_check(files, files["clean"])) == 1
    capsys.readouterr()
    assert main(_check(files, files["thousands"])) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "faux-checks: could not decide: column 'f2' is read as text: 1 of its 400 values is not a number (e.g. "
        "'1,234.5' in row 17, written with a thousands separator: read it with --thousands ','; 399 are numbers). "
        "Without a feature spec the model receives the numeric columns only, in file order, so such a column would be left out and every input after "
        "it would shift by one. Read the numbers with the option named for each column, or write them plainly "
        "(1234.5), fix or remove the other values, or pass the feature spec the model was trained with (--feature-spec); "
        "nothing was scored"), err


def test_unparsable_markers_and_numbers_as_text_are_named():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": ["1", "?", "3", "?"], "c": ["1", "2", "3", "4"],
                          "job": ["x", "y", "x", "y"], "sex": ["F", "M", "F", "M"]})
    with pytest.raises(InputError) as info:
        FeatureSpec.passthrough(frame, exclude=["sex"])
    assert str(info.value).startswith(
        "column 'b' is read as text: 2 of its 4 values are not numbers (e.g. '?' in row 1; 2 are numbers); "
        "column 'c' holds numbers stored as text (dtype object; all 4 values parse as numbers): convert it to a "
        "numeric dtype. Without a feature spec")
    # every value written with separators: still numbers, still refused; '1,000' is 1000 or 1.000, never guessed
    with pytest.raises(InputError, match=r"^column 'b' is read as text: 4 of its 4 values are not numbers \(e.g. "
                                         r"'1,000' in row 0, written with a comma that may mark thousands \(1,234 = "
                                         r"1234: --thousands ','\) or decimals \(1,234 = 1.234: --decimal ','\); give "
                                         r"the one the file means; 0 are numbers\)"):
        FeatureSpec.passthrough(frame.assign(b=["1,000", "2,500", "1 234", "9_999"], c=1), exclude=["sex"])
    with pytest.raises(InputError, match=r"^column 'b' is read as text: 4 of its 4 values are not numbers \(e.g. "
                                         r"'1 234' in row 0, written with a thousands separator: read it with "
                                         r"--thousands space; 0 are numbers\)"):
        FeatureSpec.passthrough(frame.assign(b=["1 234", "2 500", "1 000", "9 999"], c=1), exclude=["sex"])


def test_a_genuine_text_column_is_left_out_as_before(files, tmp_path, capsys):
    """An entirely non-numeric column is a categorical the model was not given: same inputs, same decision."""
    spec = FeatureSpec.passthrough(files["data"].assign(job=["a", "b"] * 200), exclude=["sex", "y"])
    assert spec.source_columns == FEATURES + ["noise"]
    with_text = files["data"].copy()
    with_text.insert(2, "job", ["a", "b"] * 200)
    with_text.to_csv(tmp_path / "text.csv", index=False)
    assert main(_check(files, tmp_path / "text.csv")) == 1
    assert "failed:" in capsys.readouterr().out


def test_streaming_scorer_refuses_the_same_column(files, tmp_path):

    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.stream.run import score_stream

    with pytest.raises(InputError, match=r"^column 'f2' is read as text: 1 of its 400 values is not a number "
                                         r"\(e.g. '1,234.5' in row 17"):
        score_stream(torch.jit.load(str(files["unfair"])), files["thousands"], policy=load_policy(files["policy"]),
                     out_path=tmp_path / "s.parquet", chunk_rows=1000)
    assert not (tmp_path / "s.parquet").exists()


def test_booleans_with_missing_values_are_not_numbers_as_text():
    """pandas reads True/False with a blank as an object column: still a boolean, left out like any boolean."""
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "owner": pd.Series([True, None, False], dtype=object), "sex": list("FMF")})
    assert FeatureSpec.passthrough(frame, exclude=["sex"]).source_columns == ["a"]


def test_parquet_text_column_holding_numbers_is_refused_by_the_streaming_scorer(files, tmp_path):

    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.stream.run import score_stream

    pd.read_csv(files["thousands"]).to_parquet(tmp_path / "t.parquet", index=False)   # f2 stored as strings
    with pytest.raises(InputError, match=r"^column 'f2' is read as text: 1 of its 400 values is not a number"):
        score_stream(torch.jit.load(str(files["unfair"])), tmp_path / "t.parquet", policy=load_policy(files["policy"]),
                     out_path=tmp_path / "s.parquet", chunk_rows=1000)


def test_thousands_option_reads_the_marked_numbers_as_the_plain_ones(files, capsys):
    """``--thousands ,``: '1,234.5' and '-2,000,000.25' read as 1234.5 and -2000000.25: the plain file's report."""
    plain = read_table(files["scaled"])
    marked = read_table(files["marked"], thousands=",")
    assert marked["f2"].dtype == marked["f0"].dtype == np.float64
    pd.testing.assert_frame_equal(marked, plain)
    assert read_table(files["marked"])["f0"].dtype == object                          # without it: text
    assert main(_check(files, files["scaled"])) == 1
    expected = capsys.readouterr().out
    assert "failed:" in expected
    assert main(_check(files, files["marked"]) + ["--thousands", ","]) == 1
    assert capsys.readouterr().out == expected                           # same flagged fraction, same lines
    assert main(_check(files, files["marked"])) == 2                     # without it: still refused, naming it
    err = capsys.readouterr().err
    assert "column 'f0' is read as text: 1 of its 400 values is not a number (e.g. '-2,000,000.25' in row 90" in err
    assert "read it with --thousands ','" in err and "Read the numbers with the option named for each column" in err


def test_thousands_mark_equal_to_the_delimiter_reads_quoted_numbers(files, tmp_path, capsys):
    """A ','-separated file with '1,234.5' quoted (as pandas writes it). ``--thousands ','`` (the
    refusal's hint) reads it as 1234.5, in the whole-table reader and the streaming source alike; an unquoted
    '1,234' there is two fields, and that row is refused by the field-count check, not misread."""
    frame = read_table(files["thousands"], thousands=",")
    assert frame["f2"].dtype == np.float64 and frame.loc[17, "f2"] == 1234.5
    expected = files["data"].copy()
    expected.loc[17, "f2"] = 1234.5
    pd.testing.assert_frame_equal(frame, expected, check_exact=False, rtol=1e-12)
    source = DataSource.open(files["thousands"], thousands=",")
    assert source.sep == source.thousands == ","
    assert main(_check(files, files["thousands"]) + ["--thousands", ","]) == 1     # decided, not refused
    assert "failed:" in capsys.readouterr().out
    lines = files["lines"][:]
    lines[18] = lines[18].replace(lines[18].split(",")[3], "1,234", 1)             # unquoted: one field too many
    (tmp_path / "unquoted.csv").write_text("\n".join(lines) + "\n")
    assert main(_check(files, tmp_path / "unquoted.csv") + ["--thousands", ","]) == 2
    assert "row 17" in capsys.readouterr().err


def test_a_thousands_mark_that_is_not_a_mark_is_refused(files):
    for bad in ("1", ".", ",,"):
        with pytest.raises(InputError, match=rf"^--thousands {re.escape(repr(bad))} is not a thousands mark"):
            read_table(files["marked"], thousands=bad)
        with pytest.raises(InputError, match=rf"^--thousands {re.escape(repr(bad))} is not a thousands mark"):
            DataSource.open(files["marked"], thousands=bad)


def test_streaming_scorer_reads_the_thousands_mark_too(files, tmp_path, capsys):
    """score-large, in this process: the marked file scores as the plain one, row for row; without it, refused."""
    base = ["score-large", "--model", str(files["unfair"]), "--policy", str(files["policy"]), "--workers", "0"]
    assert main(base + ["--data", str(files["scaled"]), "--out", str(tmp_path / "plain.csv")]) == 1
    plain_out = capsys.readouterr().out
    assert main(base + ["--data", str(files["marked"]), "--out", str(tmp_path / "marked.csv"), "--thousands", ","]) == 1
    marked_out = capsys.readouterr().out
    plain, marked = pd.read_csv(tmp_path / "plain.csv"), pd.read_csv(tmp_path / "marked.csv")
    assert len(plain) == 400 and plain["flagged"].sum() > 0
    pd.testing.assert_frame_equal(marked, plain)
    assert marked_out.splitlines()[0] == plain_out.splitlines()[0]         # the summary: same flagged fraction
    assert main(base + ["--data", str(files["marked"]), "--out", str(tmp_path / "refused.csv")]) == 2
    assert "read it with --thousands ','" in capsys.readouterr().err
    assert not (tmp_path / "refused.csv").exists()
    assert main(base[:-2] + ["--workers", "2", "--data", str(files["marked"]), "--out", str(tmp_path / "s.csv"),
                             "--thousands", ","]) == 2                  # the sharded scorer: refused, naming the fix
    assert "--thousands ',': the sharded scorer reads numbers without a thousands mark; score in this process " \
           "(--workers 0)" in capsys.readouterr().err
