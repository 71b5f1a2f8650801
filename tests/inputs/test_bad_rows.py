"""Malformed rows are named: field counts and unparsable values, by row number, whatever the workers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from faux_checks import FeatureSpec, InputError
from faux_checks.gate.policy import Policy
from faux_checks.gate.stream.run import score_stream
from faux_checks.inputs.io import read_table

ROOT = Path(__file__).resolve().parents[2]


def _data(n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(n, 3)).round(4), columns=["f0", "f1", "f2"])
    df["sex"] = rng.choice(["F", "M"], n)
    df["job"] = rng.choice(["a", "b"], n)
    return df


def _policy(**changes) -> Policy:
    payload = {"protected": "sex", "target_output": "logit", "missing_protected": "drop",
               "faux": {"variant": "faux", "delta": 0.05, "max_flagged_fraction": 0.5},
               "aux": {"epochs": 2}, "decision": {"min_group_rows": 20}}
    return Policy.model_validate({**payload, **changes})


def _write_with_bad_lines(path: Path, df: pd.DataFrame, edits: dict[int, str]) -> Path:
    """The CSV of df with data rows replaced by raw text (row i is file line i + 2)."""
    lines = df.to_csv(index=False).splitlines()
    for row, text in edits.items():
        lines[row + 1] = text
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("badrows")
    df = _data()
    spec = FeatureSpec.fit(df, ["f0", "f1", "f2", "job"], name="bad-rows")
    line = df.to_csv(index=False).splitlines()[418]
    truncated = _write_with_bad_lines(d / "truncated.csv", df, {
        417: line[: line.index(",", line.index(",") + 1)],    # cut after two fields: sex would read as missing
        520: line + ",extra"})
    unparsable = _write_with_bad_lines(d / "unparsable.csv", df, {
        33: "0.1,abc,0.2,F,a", 590: "0.1,0.2,n/a?,M,b", 591: "0.1,0.2,,M,b"})   # 591: a missing value, not malformed
    return {"dir": d, "df": df, "spec": spec, "truncated": truncated, "unparsable": unparsable}


TRUNCATED = ("data file {path} has 2 malformed rows of 600: row 417: 2 fields, expected 5 (line 419); "
             "row 520: 6 fields, expected 5 (line 522). Rows are numbered from 0 after the header")


def test_truncated_line_is_named_not_read_as_a_missing_protected_value(case, tmp_path):
    import torch

    target = torch.nn.Linear(case["spec"].n_features, 1)
    with pytest.raises(InputError) as info:           # missing_protected = "drop" would have hidden it
        score_stream(target, case["truncated"], policy=_policy(), feature_spec=case["spec"], chunk_rows=97,
                     out_path=tmp_path / "s.parquet")
    assert str(info.value).startswith(TRUNCATED.format(path=case["truncated"])), str(info.value)
    assert "missing" not in str(info.value).split("nothing was scored")[0]
    assert not (tmp_path / "s.parquet").exists() and not (tmp_path / "s.parquet.partial").exists()
    with pytest.raises(InputError) as again:          # the in-memory reader (check) says the same
        read_table(case["truncated"])
    assert str(again.value) == str(info.value)


def test_unparsable_values_are_named_with_their_rows(case, tmp_path):
    import torch

    target = torch.nn.Linear(case["spec"].n_features, 1)
    with pytest.raises(InputError) as info:
        score_stream(target, case["unparsable"], policy=_policy(), feature_spec=case["spec"], chunk_rows=256,
                     out_path=tmp_path / "s.parquet")
    msg = str(info.value)
    assert msg.startswith(f"data file {case['unparsable']} has 2 malformed rows of 600: row 33: column 'f1' has "
                          "'abc', not a number; row 590: column 'f2' has 'n/a?', not a number."), msg


def test_a_truncated_line_and_a_non_numeric_value_are_both_named(case, tmp_path):
    """Such a file reported "1 malformed rows", naming only the field count."""
    import torch

    df = case["df"]
    line = df.to_csv(index=False).splitlines()[418]
    path = _write_with_bad_lines(tmp_path / "both.csv", df, {33: "0.1,abc,0.2,F,a",
                                                             417: line[: line.index(",", line.index(",") + 1)]})
    target = torch.nn.Linear(case["spec"].n_features, 1)
    with pytest.raises(InputError) as info:
        score_stream(target, path, policy=_policy(), feature_spec=case["spec"], chunk_rows=97,
                     out_path=tmp_path / "s.parquet")
    assert str(info.value).startswith(
        f"data file {path} has 2 malformed rows of 600 (1 with a wrong field count, 1 with a value that is not a "
        "number): row 33: column 'f1' has 'abc', not a number; row 417: 2 fields, expected 5 (line 419). "), str(info.value)


def test_more_than_five_named_first_five_and_counted(case, tmp_path):
    df = case["df"]
    path = _write_with_bad_lines(tmp_path / "many.csv", df, {r: "1,2" for r in range(100, 170, 10)})
    with pytest.raises(InputError) as info:
        read_table(path)
    msg = str(info.value)
    assert "has 7 malformed rows of 600 (first 5 shown): row 100: 2 fields" in msg
    assert re.findall(r"row (\d+):", msg) == ["100", "110", "120", "130", "140"]


@pytest.mark.slow
def test_same_first_error_with_two_workers(case, tmp_path, harness):
    """The sharded flow checks the rows before the CSV is copied or any worker starts (no cluster needed)."""
    from faux_checks.inputs.models import save_torchscript
    import torch

    from faux_checks_flows.score_large import run_score_sharded

    model = save_torchscript(torch.nn.Linear(case["spec"].n_features, 1), tmp_path / "m.pt")
    spec = case["spec"].save(tmp_path / "spec.json")
    messages = []
    for chunk_rows in (97, 256):
        with pytest.raises(InputError) as info:
            score_stream(torch.jit.load(str(model)), case["truncated"], policy=_policy(), feature_spec=case["spec"],
                         chunk_rows=chunk_rows, out_path=tmp_path / f"one-{chunk_rows}.parquet")
        messages.append(str(info.value))
    with pytest.raises(InputError) as info:
        run_score_sharded(model, case["truncated"], tmp_path / "two.parquet", policy=_policy(),
                          feature_spec_path=spec, workers=2, chunk_rows=97)
    messages.append(str(info.value))
    assert len(set(messages)) == 1 and messages[0].startswith(TRUNCATED.format(path=case["truncated"]))
    assert not list(tmp_path.glob(".two*"))                # no work folder left


POLICY_HINT = re.compile(r"""(?:set|declare) ([a-z_]+) = \\?["0-9tf]""")


def test_every_hint_names_a_real_policy_key():
    """Messages that tell the user to set a policy key name one the strict policy accepts."""
    def keys(model) -> set[str]:
        out = set()
        for name, info in model.model_fields.items():
            out.add(name)
            sub = info.annotation
            for candidate in (sub, *getattr(sub, "__args__", ())):
                if isinstance(candidate, type) and hasattr(candidate, "model_fields"):
                    out |= keys(candidate)
        return out

    valid = keys(Policy) | {"label", "column", "kind"}
    hints = []
    for folder in ("faux_checks", "flows", "faux_checks_app", "expectations"):
        for path in (ROOT / folder).rglob("*.py"):
            hints += [(path.name, key) for key in POLICY_HINT.findall(path.read_text())]
    assert ("plan.py", "missing_protected") in hints and ("protected.py", "protected_kind") in hints
    assert [h for h in hints if h[1] not in valid] == []
