"""The one-way rule (docs/architecture.md): the library never imports its integrations.

``import faux_checks`` in a fresh interpreter loads neither the Great Expectations suite
(``expectations``), the Prefect flows (``flows``), the command line (``faux_checks_app``) nor
Prefect, Great Expectations, MLflow or Evidently; and no module under ``faux_checks/`` imports
them anywhere, not even inside a function.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import faux_checks

LIBRARY = Path(faux_checks.__file__).parent
UPPER_LAYERS = ("faux_checks_flows", "faux_checks_gx", "faux_checks_app")
HEAVY = ("prefect", "great_expectations", "mlflow", "evidently")


def test_import_faux_checks_loads_no_integration():
    code = ("import json, sys, faux_checks; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "faux_checks" in loaded
    assert not loaded & {"faux_checks_flows", "faux_checks_gx", "flows", "expectations", "prefect", "great_expectations"}, loaded
    assert not loaded & set(UPPER_LAYERS + HEAVY), loaded


def test_public_api_is_exported():
    for name in ("check", "check_attributes", "CheckResult", "Policy", "load_policy", "FeatureSpec", "AuxiliaryModel", "FAuxTester",
                 "TargetOutput", "encode_protected", "FauxChecksError", "InputError", "UndecidableError"):
        assert name in faux_checks.__all__, name
    assert all(hasattr(faux_checks, name) for name in faux_checks.__all__)


def _imported_modules(path: Path) -> set[str]:
    """Top-level names of every absolute import in a file, module level or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_library_module_imports_an_upper_layer():
    files = sorted(LIBRARY.rglob("*.py"))
    assert len(files) > 40
    offenders = {str(f.relative_to(LIBRARY)): sorted(_imported_modules(f) & set(UPPER_LAYERS))
                 for f in files if _imported_modules(f) & set(UPPER_LAYERS)}
    assert not offenders, offenders


def test_the_integrations_import_under_the_projects_names_only():
    """``faux_checks_flows`` and ``faux_checks_gx`` (the folders flows/ and expectations/) never pull in a
    second copy under the folders' own names as top-level modules (``flows``, ``expectations``), which a source
    checkout would resolve from the working directory."""
    code = ("import json, sys, faux_checks_flows.gate, faux_checks_flows.audit, faux_checks_gx, faux_checks_app.cli; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=900,
                         cwd=Path(__file__).resolve().parents[2])
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert {"faux_checks_flows", "faux_checks_gx", "faux_checks_app"} <= loaded
    assert not loaded & {"flows", "expectations"}, sorted(loaded & {"flows", "expectations"})
