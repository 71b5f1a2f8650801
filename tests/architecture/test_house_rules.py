"""The house's rules the code can be checked against: text says what is (no issue numbers), helpers another module
needs are public, and functions are cut by concept (no new function over 80 lines; the listed ones may only shrink).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The installed package name of each source folder.
PACKAGES = {"faux_checks": "faux_checks", "faux_checks_app": "faux_checks_app", "flows": "faux_checks_flows",
            "expectations": "faux_checks_gx"}


def _sources():
    for folder in PACKAGES:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = (PACKAGES[rel.parts[0]], *rel.with_suffix("").parts[1:])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_issue_numbers_in_code_docs_or_readme():
    """History lives in git: code, tests, benchmarks, comments, docstrings, policies and user docs say what is."""
    files = [p for folder in (*PACKAGES, "docs", "tests", "benchmarks", "scripts") for p in sorted((ROOT / folder).rglob("*"))
             if p.suffix in (".py", ".md", ".toml", ".j2", ".json") and "__pycache__" not in p.parts]
    found = [f"{p.relative_to(ROOT)}:{i}" for p in [*files, ROOT / "README.md"] if p.name != "test_house_rules.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\b[Ii]ssue [0-9]+", line)]
    assert found == [], found


def test_no_private_name_is_imported_from_another_module():
    """A helper another module needs is public (and in its module's __all__), or stays where it is used."""
    modules = {_module(p): p for p in _sources()}
    found = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package.split(".")[: len(package.split(".")) - max(node.level - 1, 0)] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])]) if node.level else node.module
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") and source in modules \
                        and source != name:
                    found.append(f"{path.relative_to(ROOT)}: {alias.name} from {source}")
    assert found == [], found


def test_no_function_grows_past_80_lines():
    lengths = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = (path.relative_to(ROOT).as_posix(), node.name)
                lengths[key] = max(lengths.get(key, 0), node.end_lineno - node.lineno + 1)
    grown = {k: n for k, n in lengths.items() if n > 80}
    assert grown == {}, f"functions over 80 lines (cut them by concept): {grown}"
