"""One unit everywhere: a gate over N ≥ 1 protected attributes is the only shape.

Per-attribute results become one decision in one place (``faux_checks.gate.sections.combine``), and the
single-attribute twins of the streamed and sharded paths stay removed: one ``score_stream``, one ``score_sharded``,
one result type for both.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("faux_checks", "faux_checks_app", "flows", "expectations")
#: Modules that held a second, several-attribute path beside the plain one; their work is the plain path's.
REMOVED = ("faux_checks/gate/stream/attributes.py", "flows/shard_attributes.py", "faux_checks/gate/check.py")


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


def test_the_twin_modules_stay_removed():
    """The several-attribute stream and shard modules are gone; nothing imports them."""
    assert [m for m in REMOVED if (ROOT / m).exists()] == []
    names = r"gate\.stream\.attributes|shard_attributes|score_stream_attributes|score_sharded_attributes|\brun_check\b"
    found = [f"{p.relative_to(ROOT)}:{i}" for p in _sources()
             for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(names, line)]
    assert found == [], found


def test_no_function_is_a_twin_of_another():
    """No public function ``f_attributes`` beside a function ``f``: one name per step, N ≥ 1 attributes."""
    defined = {node.name for p in _sources() for node in ast.walk(ast.parse(p.read_text(), filename=str(p)))
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    twins = sorted(n for n in defined if n.endswith("_attributes") and n[: -len("_attributes")] in defined
                   and n != "check_attributes")   # the library's gate; faux_checks.check displays what it returns
    assert twins == [], twins


def test_one_public_entry_per_concept():
    """``faux_checks.check`` is the entry for a gate; one attribute's check is not a second public entry."""
    import faux_checks

    assert "check" in faux_checks.__all__ and "check_one_attribute" not in faux_checks.__all__
    assert not hasattr(faux_checks, "run_check")
