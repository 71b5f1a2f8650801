"""docs/architecture.md matches the code: its "Public names" table lists exactly ``faux_checks.__all__``, each
name from the module that defines it."""

from __future__ import annotations

import re
from pathlib import Path

import faux_checks

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _public_names_table() -> dict[str, str]:
    text = DOC.read_text()
    section = text[text.index("## Public names"):]
    section = section[: section.index("\n## ", 1)]
    return dict(re.findall(r"^\| `([A-Za-z_]\w*)` \| `([\w.]+)` \|", section, flags=re.M))


def test_the_public_names_table_is_faux_checks_all():
    table = _public_names_table()
    assert sorted(table) == sorted(faux_checks.__all__)
    assert len(table) == len(faux_checks.__all__) == len(set(faux_checks.__all__))


def test_each_public_name_comes_from_the_module_the_table_names():
    wrong = {name: (module, getattr(faux_checks, name).__module__) for name, module in _public_names_table().items()
             if getattr(faux_checks, name).__module__ != module}
    assert wrong == {}


def test_the_table_parser_sees_rows():
    """A control: the parser reads the table's rows (so an empty parse cannot pass the tests above)."""
    assert {"check", "FAuxTester", "Policy"} <= set(_public_names_table())
