"""The report's JSON schema (``report_schema.json``, JSON Schema 2020-12): validation and loading."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..errors import InputError

__all__ = ["REPORT_SCHEMA_VERSION", "load_report", "validate_report"]

REPORT_SCHEMA_VERSION = "1.2"


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(resources.files("faux_checks.report").joinpath("report_schema.json").read_text())


def validate_report(report: dict) -> None:
    """Validate a report dict against ``report_schema.json`` (JSON Schema 2020-12).

    Raises
    ------
    InputError
        Listing up to 8 violations, each with its JSON path.
    """
    import jsonschema

    from jsonschema.exceptions import best_match

    def leaf(error):  # a failed oneOf/anyOf/allOf: the sub-error that says what is wrong
        while error.context:
            error = best_match(error.context)
        return error

    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted((leaf(e) for e in validator.iter_errors(report)), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        shown = "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:200]}" for e in errors[:8])
        more = f" (+{len(errors) - 8} more)" if len(errors) > 8 else ""
        raise InputError(f"report does not match report schema {REPORT_SCHEMA_VERSION}: {shown}{more}")


def load_report(path: str | Path) -> dict:
    """Read and validate ``report.json`` (a file, or a run folder holding one).

    Raises
    ------
    InputError
        Missing or unreadable file, invalid JSON, or a schema violation.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    try:
        report = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read report {path}: {exc}; pass a run folder or its report.json") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(report, dict):
        raise InputError(f"{path} holds a JSON {type(report).__name__}, not a report object")
    validate_report(report)
    return report
