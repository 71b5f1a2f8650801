"""Ordinary data formats. A ';'-separated CSV (bank marketing's own file) is sniffed, ``--sep``
overrides; yes/no labels map with a declared positive class and are refused without one; a column named like a
label never becomes a model input when no label is declared.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from _support import linear, make_data
from faux_checks import load_policy
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.errors import InputError
from faux_checks.gate.rows import prepare_audit
from faux_checks.gate.stream.source import DataSource
from faux_checks.inputs.io import read_table, sniff_sep
from faux_checks.inputs.labels import encode_labels

BANK = Path(__file__).resolve().parents[3] / "shared" / "data" / "bank_marketing" / "bank-additional.csv"  # ../shared


def test_a_semicolon_csv_is_sniffed_and_sep_overrides(tmp_path):
    if not BANK.exists():
        pytest.skip(f"{BANK} is not on this machine")
    head = tmp_path / "bank.csv"
    head.write_text("".join(BANK.read_text().splitlines(keepends=True)[:201]))
    assert sniff_sep(head) == ";"
    frame = read_table(head)
    assert frame.shape == (200, 21) and list(frame.columns[:3]) == ["age", "job", "marital"]
    assert frame["y"].isin(["yes", "no"]).all() and frame["age"].dtype.kind == "i"
    assert DataSource.open(head).columns == tuple(frame.columns) and DataSource.open(head).sep == ";"
    forced = read_table(head, sep=",")                                # the user's word wins: one column
    assert forced.shape[1] == 1
    tabbed = tmp_path / "bank.tsv"
    frame.to_csv(tabbed, sep="\t", index=False)
    assert sniff_sep(tabbed) == "\t" and read_table(tabbed).equals(frame)
    assert read_table(tabbed, sep="tab").equals(frame)
    comma = tmp_path / "comma.csv"
    frame.to_csv(comma, index=False)
    assert sniff_sep(comma) == "," and read_table(comma).equals(frame)
    with pytest.raises(InputError, match=r"--sep ';;' is not one character"):
        read_table(head, sep=";;")


def test_text_labels_map_with_a_declared_positive_class_and_are_refused_without_one():
    y = pd.Series(["no", "yes", None, "yes", " no"])
    np.testing.assert_array_equal(encode_labels(y, column="y", positive_label="yes"), [0, 1, np.nan, 1, 0])
    with pytest.raises(InputError) as err:
        encode_labels(y, column="y")
    msg = str(err.value)
    assert "label column 'y' holds text" in msg and "'yes' (2)" in msg and "4 of 5 rows" in msg
    assert 'positive_label = "' in msg and "--positive-label" in msg
    with pytest.raises(InputError, match=r"positive_label 'Yes' is not a value of the label column 'y' \(values: \['no', 'yes'\]\)"):
        encode_labels(y, column="y", positive_label="Yes")
    np.testing.assert_array_equal(encode_labels(pd.Series([0, 1, 1]), column="y"), [0, 1, 1])


def test_the_check_maps_yes_no_labels_or_refuses_them_before_scoring():
    df = make_data(300, seed=1)
    df["y"] = np.where(df["y"] == 1, "yes", "no")
    policy = load_policy(protected="sex", label="y")
    with pytest.raises(InputError, match=r"label column 'y' holds text"):
        prepare_audit(df, policy=policy)
    rows = prepare_audit(df, policy=policy.with_overrides(positive_label="yes"))
    np.testing.assert_array_equal(rows.y_true, (df["y"].to_numpy() == "yes").astype(float)[rows.row_index])
    assert policy.with_overrides(positive_label="yes").sha256() != policy.sha256()
    assert load_policy(protected="sex", label="y").sha256() == policy.sha256()   # unset: the hash it had before


def test_a_label_named_column_never_becomes_a_model_input():
    df = make_data(300, seed=2)                                         # f0..f3, proxy, sex, y (0/1)
    policy = load_policy(protected="sex").with_overrides(label=None)
    with pytest.raises(InputError) as err:
        check_one_attribute(linear([1.0, 0, 0, 0, 0, 0]), df, policy=policy)
    msg = str(err.value)
    assert "['y'] look like a label" in msg and "--label y" in msg
    rows = prepare_audit(df, policy=policy.with_overrides(label="y"))
    assert rows.feature_spec.source_columns == ["f0", "f1", "f2", "f3", "proxy"]


def test_cli_check_reads_a_semicolon_csv_with_yes_no_labels(tmp_path, capsys):
    from faux_checks_app.cli import main

    df = make_data(400, seed=0)
    df["y"] = np.where(df["y"] == 1, "yes", "no")
    path = tmp_path / "data.csv"
    df.to_csv(path, sep=";", index=False)
    model = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(linear([1.0, 0.5, 0, 0, 0])), str(model))
    policy = tmp_path / "p.toml"
    policy.write_text('protected = "sex"\ntarget_output = "logit"\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n'
                      '[aux]\nepochs = 30\n[decision]\nmin_group_rows = 20\naux_seeds = 1\n')
    args = ["check", "--model", str(model), "--data", str(path), "--policy", str(policy), "--label", "y"]
    assert main(args) == 2                                              # text labels, no positive class: refused
    assert "holds text" in capsys.readouterr().err
    assert main(args + ["--positive-label", "yes"]) == 0
    assert main(args + ["--positive-label", "yes", "--sep", ","]) == 3    # forced wrong delimiter: columns missing,
    assert "configuration error" in capsys.readouterr().err               # a configuration error


def test_the_streaming_scorer_sniffs_a_semicolon_csv_and_takes_a_forced_sep(tmp_path):
    from _support import write_policy
    from faux_checks import score_stream

    df = make_data(400, seed=0)
    comma, semi = tmp_path / "comma.csv", tmp_path / "semi.csv"
    df.to_csv(comma, index=False)
    df.to_csv(semi, sep=";", index=False)
    policy = load_policy(write_policy(tmp_path / "p.toml", target_output='"logit"'))
    model = linear([1.0, 0, 0, 0, 2.0])
    runs = [score_stream(model, path, policy=policy, out_path=tmp_path / f"s{i}.csv", **kw)["sex"]
            for i, (path, kw) in enumerate([(comma, {}), (semi, {}), (semi, {"sep": ";"})])]
    assert runs[0].n_individuals == runs[1].n_individuals == 400
    assert runs[0].flagged_fraction == runs[1].flagged_fraction == runs[2].flagged_fraction > 0
    first = pd.read_csv(tmp_path / "s0.csv")
    for i in (1, 2):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / f"s{i}.csv"), first)


def test_gate_and_audit_take_sep_and_their_flows_read_with_it(tmp_path):
    from faux_checks_app.parser import build_parser
    from faux_checks_flows.audit import load_table
    from faux_checks_flows.gate_tasks import load_audit_data

    parser = build_parser()
    assert parser.parse_args(["gate", "m", "--data", "d.csv", "--sep", ";"]).sep == ";"
    assert parser.parse_args(["audit", "m", "--data", "d.csv", "--sep", "tab"]).sep == "tab"
    assert parser.parse_args(["score-large", "--model", "m.pt", "--data", "d.csv", "--out", "o.parquet",
                              "--sep", "|", "--protected", "sex"]).sep == "|"
    df = make_data(50, seed=0)
    path = tmp_path / "semi.csv"
    df.to_csv(path, sep=";", index=False)
    for read in (load_audit_data.fn, load_table.fn):
        assert read(str(path)).shape == df.shape                       # sniffed
        assert read(str(path), ";").shape == df.shape                  # given
        assert read(str(path), ",").shape == (50, 1)                   # the user's word wins
