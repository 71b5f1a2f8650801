"""Names and values from data are escaped wherever they are shown.

A column named ``<script>...`` and a category ``<img onerror=...>`` reach neither Evidently's
``evidently_drift.html`` as raw HTML (where the script would run) nor a Prefect Markdown artifact raw;
``faux-checks report`` on an edited ``report.json`` renders no working ``javascript:`` link; escape
sequences in a column name are never printed raw, so a failed check cannot be redrawn as "passed".
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import _support
from _support import UNFAIR
from faux_checks.report._format import printable
from faux_checks.report.artifacts import artifact_markdown, markdown_text
from faux_checks_app.cli import main

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
#: moves the cursor up one line, clears it and writes over it from its start (CSI G: column 1)
REDRAW = "\x1b[1A\x1b[2K\x1b[Gpassed: 0.00% flagged"


def _batch(seed: int, names=(SCRIPT, "cat")) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({names[0]: rng.normal(size=300) + 0.3 * seed,
                         names[1]: rng.choice(["a", IMG, "b&c"], 300, p=[0.5, 0.3 - 0.1 * seed, 0.2 + 0.1 * seed]),
                         "sex": rng.choice(["F", "M"], 300)})


def test_evidently_page_gets_escaped_names_and_values_and_the_same_statistics(tmp_path):
    from faux_checks.audit.columns import column_drift

    roles = {SCRIPT: "feature", "cat": "feature", "sex": "protected"}
    drift = column_drift(_batch(0), _batch(1), roles, categorical=("sex",), html_path=tmp_path / "evidently_drift.html")
    page = (tmp_path / "evidently_drift.html").read_text()
    assert SCRIPT not in page and IMG not in page and "<img" not in page and "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert [c.column for c in drift.columns] == [SCRIPT, "cat", "sex"]         # results keep the names as given
    plain = column_drift(_batch(0, ("x", "cat")).replace(IMG, "img"), _batch(1, ("x", "cat")).replace(IMG, "img"),
                         {"x": "feature", "cat": "feature", "sex": "protected"}, categorical=("sex",))
    # escaping changes no statistic (the categories' order, hence the sum's rounding, may differ)
    assert [c.score for c in drift.columns] == pytest.approx([c.score for c in plain.columns], rel=1e-9)
    assert [c.drifted for c in drift.columns] == [c.drifted for c in plain.columns]


def test_markdown_text_leaves_no_html_link_or_cell_break():
    assert markdown_text(f"{SCRIPT} [x](javascript:alert(1)) a|b 5% & max_rows") == (
        "&lt;script&gt;alert\\(1\\)&lt;/script&gt; \\[x\\]\\(javascript:alert\\(1\\)\\) a\\|b 5% &amp; max\\_rows")
    assert markdown_text("two\nlines\x1b[1A") == "two\\\\nlines\\\\x1b\\[1A"


def test_gate_and_report_artifacts_escape_names_values_and_reasons():
    from faux_checks_flows.gate_per_version import VersionOutcome, outcome_markdown

    outcome = VersionOutcome(model_name="m<b>", version="3", decision="failed",
                             reasons=[f"column '{SCRIPT}' drifted"], flagged_fraction=0.5,
                             by_group=[{"group": IMG, "n": 10, "flagged_fraction": 0.5}], report_dir="/r")
    md = outcome_markdown(outcome)
    assert "<" not in md and ">" not in md.replace("→", "")
    assert md.splitlines()[0] == "## m&lt;b&gt; v3: **failed**"
    assert "- column '&lt;script&gt;alert\\(1\\)&lt;/script&gt;' drifted" in md.splitlines()
    assert "| &lt;img src=x onerror=alert\\(1\\)&gt; | 10 | 0.5 |" in md.splitlines()
    report = {"kind": "audit", "decision": "failed", "rule": f"'{SCRIPT}' drifted", "model": {"name": IMG, "version": "1"},
              "audit": {"drift": {"n_drifted": 1, "n_compared": 2, "skipped": [{"column": SCRIPT, "reason": IMG}]}}}
    text = artifact_markdown(report)
    assert "<" not in text
    assert text.splitlines()[0] == "## audit · &lt;img src=x onerror=alert\\(1\\)&gt; v1: **failed**"


def _tampered_report(tmp_path, link: str):
    from faux_checks.report.build import write_report

    paths = write_report(tmp_path / "r", decision="undecided", reasons=["could not decide"], check=None,
                         model={"path": "m.pt"}, artifacts={"evidence": "records/scores.parquet"})
    report = json.loads(paths["json"].read_text())
    report["artifacts"]["evil"] = link
    report["rule"] = f"undecided\x1b[1A\x1b[2K\r{SCRIPT}"
    paths["json"].write_text(json.dumps(report))
    paths["html"].unlink()
    return paths


@pytest.mark.parametrize("link", ["javascript:alert(1)", " JavaScript:alert(1)", "java\tscript:alert(1)",
                                  "data:text/html,<script>alert(1)</script>"])
def test_report_command_renders_no_script_link(tmp_path, capsys, link):
    paths = _tampered_report(tmp_path, link)
    assert main(["report", str(paths["json"])]) == 2            # the report's own decision: undecided
    page = paths["html"].read_text()
    assert "href='records/scores.parquet'" in page              # a relative link stays a link
    hrefs = [part.split("'")[0] for part in page.split("href='")[1:]]
    assert all(not h.lower().lstrip().startswith(("javascript", "data", "java\t")) for h in hrefs), hrefs
    assert "(not linked: only http, https, file and relative links are)" in page
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert "  rule: undecided\\x1b[1A\\x1b[2K\\r<script>alert(1)</script>" in out.splitlines()


def test_printable_escapes_controls_and_bidi_but_not_text():
    assert printable("a\x1b[2K\rb\nc\td\u202ee\x7f\x9b") == "a\\x1b[2K\\rb\\nc\td\\u202ee\\x7f\\x9b"
    assert printable("a\nb\x07", keep_newlines=True) == "a\nb\\x07"
    assert printable("δ = 0.05, ŷ, 95%–99%") == "δ = 0.05, ŷ, 95%–99%"


def test_check_prints_escape_sequences_from_a_column_name_as_text(tmp_path, capsys):
    """A feature named with a redraw sequence: the failed check stays 'failed' on the terminal."""
    from faux_checks.inputs.models import save_torchscript

    name = "f1" + REDRAW
    data = _support.make_data(400).rename(columns={"f1": name})
    data.to_csv(tmp_path / "data.csv", index=False)
    model = save_torchscript(_support.linear(UNFAIR), tmp_path / "unfair.pt")
    policy = _support.write_policy(tmp_path / "policy.toml")
    code = main(["check", "--model", str(model), "--data", str(tmp_path / "data.csv"), "--policy", str(policy), "-q"])
    out = capsys.readouterr().out
    assert code == 1 and out.startswith("failed: ")
    assert "\x1b" not in out
    assert "f1\\x1b[1A\\x1b[2K\\x1b[Gpassed: 0.00% flagged" in out
    assert [line for line in out.splitlines() if line.startswith("passed")] == []


def test_log_filter_escapes_the_args_and_the_formatted_message():
    import logging

    from faux_checks_flows.log_text import EscapingFilter

    record = logging.LogRecord("prefect.flow_runs", logging.INFO, __file__, 1, "%s v%s: %s (%s)",
                               ("m\x1b[32mpassed\x1b[0m", 3, "failed", ValueError("col\u202eumn\nx")), None)
    assert EscapingFilter().filter(record) is True
    assert record.getMessage() == "m\\x1b[32mpassed\\x1b[0m v3: failed (col\\u202eumn\nx)"
    assert record.args is None
    named = logging.LogRecord("x", logging.INFO, __file__, 1, "group %(g)s line\nnext", ({"g": "a\rb"},), None)
    EscapingFilter().filter(named)
    assert named.getMessage() == "group a\\rb line\nnext"           # a name's \r escaped, our own \n kept
    plain = logging.LogRecord("x", logging.INFO, __file__, 1, "%d of %s rows, δ = %.2f", (3, "ŷ", 0.05), None)
    EscapingFilter().filter(plain)
    assert plain.getMessage() == "3 of ŷ rows, δ = 0.05"


def test_flow_and_task_run_logs_show_escapes_as_text(harness):
    """Through Prefect: a flow and a task log a model name that would redraw the line as "passed"."""
    import logging

    from prefect import flow, task

    from faux_checks_flows.common import run_logger

    name = "m\x1b[32mpassed\x1b[0m"

    @task
    def in_task(value: str) -> None:
        run_logger().info("task saw column %s", value)

    @flow
    def tiny(value: str) -> None:
        run_logger().info("%s v%s: %s", value, 1, "failed")
        in_task(value)

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    keep = Keep()
    loggers = [logging.getLogger("prefect.flow_runs"), logging.getLogger("prefect.task_runs")]
    for lg in loggers:
        lg.addHandler(keep)
    try:
        tiny(name)
    finally:
        for lg in loggers:
            lg.removeHandler(keep)
    messages = [r.getMessage() for r in records]
    assert "m\\x1b[32mpassed\\x1b[0m v1: failed" in messages, messages
    assert "task saw column m\\x1b[32mpassed\\x1b[0m" in messages, messages
    assert not any("\x1b" in m for m in messages)
