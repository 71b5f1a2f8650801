"""MkDocs hooks of the documentation site (``mkdocs.yml``): two pages generated at build time, never copied.

- ``index.md``: the repository's README.md, its ``docs/...`` links rewritten to the site's pages, so the front
  page and the README are one text;
- ``api.md``: one mkdocstrings block per public name of ``faux_checks`` (its ``__all__``, each at the module that
  defines it: ``faux_checks._LAZY``), grouped by module, so a new public name gets its page without an edit here.

Hook events: https://www.mkdocs.org/user-guide/configuration/#hooks (``on_files``).
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]


def front_page() -> str:
    """README.md with ``](docs/x.md)`` links read from the site's root and other repository paths left as code."""
    text = (ROOT / "README.md").read_text()
    return re.sub(r"\]\(docs/", "](", text)


def api_page() -> str:
    """The API page: the public names of ``faux_checks`` grouped by the module that defines them."""
    import faux_checks

    by_module: dict[str, list[str]] = {}
    for name in sorted(faux_checks.__all__, key=str.lower):
        by_module.setdefault(faux_checks._LAZY[name].lstrip("."), []).append(name)
    out = ["# Python API", "",
           "The public names of `faux_checks` (its `__all__`), from their docstrings: shapes, units, the errors "
           "raised and the source of each method. `from faux_checks import NAME` imports each.", ""]
    for module in sorted(by_module):
        out += [f"## `faux_checks.{module}`", ""]
        out += [f"::: faux_checks.{module}.{name}\n" for name in by_module[module]]
    return "\n".join(out)


def on_files(files, config):
    """Add the two generated pages to the site's files."""
    files.append(File.generated(config, "index.md", content=front_page()))
    files.append(File.generated(config, "api.md", content=api_page()))
    return files
