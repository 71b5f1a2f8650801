"""Habits that keep the house readable: no module of the library or its
integrations over 500 lines, and the protected-attribute ``Kind`` literal written in one module only."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("faux_checks", "faux_checks_app", "flows", "expectations")
MAX_LINES = 500


def _modules():
    return sorted(p for d in PACKAGES for p in (ROOT / d).rglob("*.py"))


def test_no_module_is_over_500_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in _modules()}
    assert len(sizes) > 100                                      # the walk sees the tree (a control)
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert over == {}, f"split these along their concepts (docs/architecture.md): {over}"


def test_the_kind_literal_is_written_once():
    spelled = re.compile(r'Literal\[\s*"binary",\s*"multiclass",\s*"continuous"\s*\]')
    where = [str(p.relative_to(ROOT)) for p in _modules() if spelled.search(p.read_text(encoding="utf-8"))]
    assert where == ["faux_checks/kinds.py"], f"import Kind from faux_checks.kinds instead: {where}"
