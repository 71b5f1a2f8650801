"""The gate policy: what is tested, with which settings, and what fails a deployment.

Loaded from TOML and validated by pydantic in strict mode: unknown keys are errors (a typo must
never turn a check off silently), and so is a value of the wrong type (``true`` or ``"0.05"``
where a number belongs is never converted; an integer is accepted where a float is expected, as
TOML writes ``0`` for zero); NaN and infinity are refused. The shipped default,
``faux_checks/gate/policies/default.toml``, explains every number with the measurement behind it,
and every default there equals the code's (``tests/gate/test_policy_strict.py``).

This module reads policies: TOML files (:func:`load_policy`), the shipped ones (:func:`policy_path`),
those recorded by earlier gates (:func:`recorded_policy`), and its validation errors in TOML terms
(:func:`policy_errors`). The schema is :mod:`faux_checks.gate.policy_schema` (:class:`Policy`, the
attribute forms) and :mod:`faux_checks.gate.policy_sections` (one model per section); their names are
re-exported here, the policy's one public face.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import ValidationError

from ..errors import InputError
from .policy_schema import INTERSECTION_SEPARATOR, AttributeSettings, Policy
from .policy_sections import (MAX_AUX_LAYERS, MAX_AUX_UNITS, AuditSettings, AuxSettings, DecisionSettings, FauxSettings,
                              OperationsSettings, ProtectedFileSettings, ScaleSettings)
from .tester_settings import TesterSettings

__all__ = ["Policy", "AttributeSettings", "AuxSettings", "FauxSettings", "TesterSettings", "ScaleSettings", "AuditSettings",
           "DecisionSettings", "OperationsSettings", "ProtectedFileSettings", "load_policy", "default_policy_path", "policy_path", "policy_errors", "recorded_policy",
           "SHIPPED_POLICIES", "INTERSECTION_SEPARATOR", "MAX_AUX_LAYERS", "MAX_AUX_UNITS"]


SHIPPED_POLICIES = ("default", "adult")


def policy_path(name: str = "default") -> Path:
    """Path of a shipped policy TOML: ``"default"`` (generic) or ``"adult"`` (the bundled demo's declarations)."""
    if name not in SHIPPED_POLICIES:
        raise InputError(f"no shipped policy named {name!r}; shipped: {list(SHIPPED_POLICIES)}")
    return Path(__file__).parent / "policies" / f"{name}.toml"


def default_policy_path() -> Path:
    """Path of the shipped default policy TOML."""
    return policy_path("default")


def load_policy(path: str | Path | None = None, **overrides) -> Policy:
    """Read and validate a policy TOML (the shipped default when ``path`` is None).

    Parameters
    ----------
    path : str or Path, optional
    **overrides
        Top-level fields to replace, e.g. ``protected="sex"``.

    Raises
    ------
    InputError
        Unreadable file, TOML syntax error, or a validation error: each key named with the value
        found, its type and what is expected (:func:`policy_errors`).
    """
    path = Path(path) if path is not None else default_policy_path()
    try:
        payload = tomllib.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read policy {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"policy {path} is not valid TOML: {exc}") from exc
    payload.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Policy.model_validate(payload)
    except ValidationError as exc:
        raise InputError(f"policy {path} is invalid: {policy_errors(exc)}") from None


#: Keys renamed since policies were first recorded by gates: (old path, new path). A recorded policy is
#: read with these applied, so that a version gated earlier can still be audited with its own policy.
RENAMED_KEYS = ((("audit", "min_group_rows"), ("decision", "min_group_rows")),)

#: Keys a policy may not set, with why and what to do: refused by :func:`policy_errors` with these words.
REFUSED_KEYS = {"reports_per_attribute": "not a setting: every output has one section per protected attribute and "
                                         "one decision over them all, for one attribute as for several; remove it"}


def recorded_policy(policy_json: str) -> Policy:
    """A policy recorded by an earlier gate (JSON), read with :data:`RENAMED_KEYS` applied.

    A renamed key moves to its new place unless that place is already set; everything else is
    validated as strictly as a policy file.

    Raises
    ------
    InputError
        Not JSON, or invalid: each key named with the value found, its type and what is expected.
    """
    try:
        payload = json.loads(policy_json)
    except json.JSONDecodeError as exc:
        raise InputError(f"the recorded policy is not valid JSON: {exc}") from exc
    for (old_section, old_key), (new_section, new_key) in RENAMED_KEYS:
        section = payload.get(old_section)
        if isinstance(section, dict) and old_key in section:
            value = section.pop(old_key)
            payload.setdefault(new_section, {}).setdefault(new_key, value)
    try:
        return Policy.model_validate(payload)
    except ValidationError as exc:
        raise InputError(f"the recorded policy is invalid: {policy_errors(exc)}") from None


_TOML_TYPES = {bool: "boolean", str: "string", int: "integer", float: "float", list: "array", tuple: "array",
               dict: "table", type(None): "nothing"}
_EXPECTED = {"float_type": "a number (float or integer)", "float_parsing": "a number (float or integer)",
             "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
             "bool_type": "a boolean (true or false)", "bool_parsing": "a boolean (true or false)",
             "string_type": "a string", "tuple_type": "an array", "list_type": "an array", "dict_type": "a table",
             "model_type": "a table", "model_attributes_type": "a table", "finite_number": "a finite number"}


def policy_errors(exc: ValidationError) -> str:
    """Each validation error as "key: found VALUE (TYPE); expected WHAT", joined by "; ".

    ``key`` is the dotted TOML path (``faux.max_flagged_fraction``); TYPE is the TOML type of the
    value found; WHAT the type expected, the allowed values or the bound that failed.
    """
    problems = []
    for e in exc.errors():
        key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in e["loc"]).lstrip(".") or "(policy)"
        if e["type"] == "extra_forbidden" and key in REFUSED_KEYS:
            problems.append(f"{key}: {REFUSED_KEYS[key]}")
            continue
        if e["type"] == "extra_forbidden":
            problems.append(f"{key}: unknown key (a typo would turn a setting off silently); remove or rename it")
            continue
        if e["type"] == "missing":
            problems.append(f"{key}: required, not given")
            continue
        if e["type"] == "value_error":                  # a rule across keys (a model validator): its own words
            problems.append(f"{key}: {e['msg'].removeprefix('Value error, ')}")
            continue
        value = e.get("input")
        found = "true" if value is True else "false" if value is False else repr(value)
        kind = _TOML_TYPES.get(type(value), type(value).__name__)
        expected = _EXPECTED.get(e["type"]) or e["msg"].removeprefix("Input should be").strip()
        shown = found if len(found) <= 80 else found[:77] + "..."
        problems.append(f"{key}: found {shown} ({kind}); expected {expected}")
    return "; ".join(problems)
