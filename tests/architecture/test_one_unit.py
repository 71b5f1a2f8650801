"""One unit everywhere: a gate over N ≥ 1 protected attributes is the only shape.

Per-attribute results become one decision in one place (``faux_checks.gate.sections.combine``), and the
single-attribute twins of the streamed and sharded paths stay removed: one ``score_stream``, one ``score_sharded``,
one result type for both.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("faux_checks", "faux_checks_app", "flows", "expectations")


def _sources():
    for folder in FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _definitions(name: str) -> list[str]:
    return [f"{p.relative_to(ROOT)}:{node.lineno}" for p in _sources()
            for node in ast.walk(ast.parse(p.read_text(), filename=str(p)))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name]


def test_one_combine():
    """Exactly one function named ``combine``, in gate/sections.py; no second ``prefixed_rules``."""
    assert _definitions("combine") == [d for d in _definitions("combine") if d.startswith("faux_checks/gate/sections.py")]
    assert len(_definitions("combine")) == 1, _definitions("combine")
    assert len(_definitions("prefixed_rules")) == 1, _definitions("prefixed_rules")
