"""What the README and docs/ say about the code, checked against the code.

Four kinds of claim can be read mechanically: command-line flags, exit codes, policy keys (with the
defaults docs/policy.md states) and decision-rule names. A flag renamed in the parser, a key dropped from a
policy section or a rule renamed in the engine makes these fail until the page is corrected.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Flags of other tools that the pages quote: pytest-xdist (the test command), mkdocs (the site build),
#: MLflow's server (docs/operations.md).
OTHER_TOOLS_FLAGS = {"--dist", "--strict", "--backend-store-uri"}


def _code_spans(path: Path) -> list[str]:
    return re.findall(r"`([^`]+)`", path.read_text())


def _parser_flags() -> set[str]:
    from faux_checks_app.parser import build_parser

    flags: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            flags.update(o for o in action.option_strings if o.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    return flags


def _benchmark_flags() -> set[str]:
    flags: set[str] = set()
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                flags.update(a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--"))
    return flags


def test_every_flag_the_pages_quote_exists():
    known = _parser_flags() | _benchmark_flags() | OTHER_TOOLS_FLAGS
    quoted = {(flag, path.relative_to(ROOT).as_posix()) for path in PAGES for span in _code_spans(path)
              for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", span)}
    unknown = sorted((flag, page) for flag, page in quoted if flag not in known)
    assert unknown == [], f"flags quoted in the docs that no parser defines: {unknown}"
    assert "--policy" in {f for f, _ in quoted} and "--protected" in _parser_flags()       # the reader sees flags


def _exit_rows(path: Path) -> dict[int, str]:
    """The rows ``| code | decision | meaning |`` of a page's exit-code table."""
    return {int(code): decision for code, decision in
            re.findall(r"^\| (\d) \| ([a-z()]+(?: [a-z()]+)?) \|", path.read_text(), flags=re.M)}


@pytest.mark.parametrize("page", ["README.md", "docs/decisions.md"])
def test_the_exit_code_tables_are_the_engines(page):
    from faux_checks.errors import EXIT_CONFIGURATION
    from faux_checks.gate.decision import EXIT_CODES

    rows = _exit_rows(ROOT / page)
    assert {code: name for code, name in rows.items() if name != "(none)"} == {v: k for k, v in EXIT_CODES.items()}
    assert rows[EXIT_CONFIGURATION] == "(none)"


def _section_models() -> dict[str, type]:
    from faux_checks.gate.policy_schema import Policy

    models = {}
    for name, field in Policy.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            models[name] = annotation
    return models


def test_every_section_key_the_pages_quote_exists():
    models = _section_models()
    assert {"decision", "faux", "aux", "operations"} <= set(models)
    quoted = {(section, key, path.relative_to(ROOT).as_posix()) for path in PAGES
              for section, key in re.findall(r"\[([a-z_]+)\] ([a-z_]+)", path.read_text())
              if section in models}
    unknown = sorted(q for q in quoted if q[1] not in models[q[0]].model_fields)
    assert unknown == [], f"policy keys quoted in the docs that their section does not define: {unknown}"
    assert len(quoted) >= 10


def _stated_default(text: str):
    text = text.strip()
    if text.startswith("unset"):
        return None
    value = text.strip("`")
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def test_the_decision_table_states_the_codes_defaults():
    decision = _section_models()["decision"]
    rows = re.findall(r"^\| `([a-z_]+)` \| ([^|]+) \|", (ROOT / "docs" / "policy.md").read_text(), flags=re.M)
    assert len(rows) >= 6
    wrong = {key: (stated.strip(), decision.model_fields[key].default) for key, stated in rows
             if key not in decision.model_fields or _stated_default(stated) != decision.model_fields[key].default}
    assert wrong == {}, f"docs/policy.md's [decision] rows that differ from DecisionSettings: {wrong}"


def test_every_rule_the_decisions_page_names_is_a_rule_of_the_code():
    table = (ROOT / "docs" / "decisions.md").read_text().split("## Exit codes")[0]
    names = re.findall(r"^\| `([a-z_]+)`", table, flags=re.M)
    assert "min_group_rows" in names and "max_flagged_fraction" in names
    source = "\n".join(p.read_text() for p in sorted((ROOT / "faux_checks" / "gate").rglob("*.py")))
    missing = [n for n in names if f'"{n}"' not in source]
    assert missing == [], f"rules named in docs/decisions.md that the gate never writes: {missing}"
