"""The documentation site: the README is a front page, every page is in the site's navigation, every link resolves.

``mkdocs build --strict`` in CI checks the same and more (API names, anchors); these checks run without mkdocs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move sections to docs/ (the site) instead"


def test_every_docs_page_is_in_the_navigation():
    yml = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r":\s*([\w\-/]+\.md)\s*$", yml, flags=re.M))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - listed == set(), "pages missing from mkdocs.yml's nav"
    assert listed - pages - {"index.md", "api.md"} == set(), "nav entries without a page"   # the two generated ones


@pytest.mark.parametrize("page", ["README.md", *sorted(p.relative_to(ROOT).as_posix()
                                                       for p in (ROOT / "docs").glob("*.md"))])
def test_relative_links_resolve(page):
    path = ROOT / page
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)          # links inside code blocks are examples
    broken = [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
              if "://" not in t and not t.startswith("mailto:") and not (path.parent / t).exists()]
    assert broken == [], f"{page}: links to files that do not exist: {broken}"


def test_the_site_generates_the_front_page_and_the_api_page_from_the_code():
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        pytest.importorskip("mkdocs")
        import mkdocs_hooks
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    import faux_checks

    front = mkdocs_hooks.front_page()
    assert "](docs/" not in front and "](overview.md)" in front
    api = mkdocs_hooks.api_page()
    for name in faux_checks.__all__:
        assert re.search(rf"^::: faux_checks\.[\w.]+\.{name}$", api, flags=re.M), name
