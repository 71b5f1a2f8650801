"""Strict policies: every field strictly typed, bounds checked, one default per setting.

The matrix walks every field of every policy section (their pydantic annotations) and writes a
TOML policy with a value of the wrong type at that key: a boolean or a string where a number
belongs, a number or a boolean where a string or a boolean belongs, a string where an array or a
table belongs. Each must be refused by ``load_policy`` with an :class:`InputError` naming the key,
the value found, its TOML type and the type expected (the CLI exits 2 on it).
"""

from __future__ import annotations

import re
import tomllib
import types
import typing
from pathlib import Path

import pytest

import faux_checks.gate.policy as schema
from faux_checks.errors import InputError
from faux_checks.gate.policy import Policy, load_policy, policy_path

SECTIONS = {"": Policy, "faux.": schema.FauxSettings, "aux.": schema.AuxSettings, "decision.": schema.DecisionSettings,
            "audit.": schema.AuditSettings, "scale.": schema.ScaleSettings, "testers.fta.": schema.TesterSettings,
            "attributes.": schema.AttributeSettings, "operations.": schema.OperationsSettings,
            "protected_file.": schema.ProtectedFileSettings}
EXPECTED = {"float": "a number (float or integer)", "int": "an integer", "bool": "a boolean (true or false)",
            "str": "a string", "array": "an array", "table": "a table"}


def _kind(annotation) -> str:
    """The TOML kind a field expects, from its annotation (Optional and Annotated unwrapped)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return _kind(next(a for a in typing.get_args(annotation) if a is not type(None)))
    if origin is typing.Literal:
        return "literal"
    if origin is tuple:
        return "array"
    if origin is dict or (isinstance(annotation, type) and issubclass(annotation, Policy.__mro__[1])):
        return "table"
    return {float: "float", int: "int", bool: "bool", str: "str"}[annotation]


#: Wrong values per expected kind: (TOML text, what the message shows, its TOML type, what it says is expected).
WRONG = {
    "float": [("true", "true", "boolean", EXPECTED["float"]), ('"0.05"', "'0.05'", "string", EXPECTED["float"])],
    "int": [("true", "true", "boolean", EXPECTED["int"]), ('"3"', "'3'", "string", EXPECTED["int"]),
            ("2.5", "2.5", "float", EXPECTED["int"])],
    "bool": [("1", "1", "integer", EXPECTED["bool"]), ('"true"', "'true'", "string", EXPECTED["bool"])],
    "str": [("1", "1", "integer", EXPECTED["str"]), ("true", "true", "boolean", EXPECTED["str"])],
    "literal": [("1", "1", "integer", None), ("true", "true", "boolean", None)],
    "array": [('"x"', "'x'", "string", EXPECTED["array"])],
    "table": [('"x"', "'x'", "string", EXPECTED["table"])],
}


def _cases():
    for prefix, model in SECTIONS.items():
        for name, info in model.model_fields.items():
            if prefix == "" and name in ("faux", "testers") or name == "linked_columns":
                kind = "table"
            else:
                kind = _kind(info.annotation)
            for toml_value, shown, toml_type, expected in WRONG[kind]:
                yield pytest.param(prefix + name, toml_value, shown, toml_type, expected,
                                   id=f"{prefix}{name}={toml_value}")


def _write(tmp_path: Path, key: str, toml_value: str) -> Path:
    """A minimal policy as TOML (protected, [faux] delta and limit, [testers.fta]) with ``key`` (dotted) set to ``toml_value``."""
    *sections, leaf = key.split(".")
    tables: dict[str, dict[str, str]] = {"": {"protected": '"sex"'}, "faux": {"delta": "0.1", "max_flagged_fraction": "0.05"},
                                         "testers.fta": {"threshold": "1.0"}}
    if sections == ["attributes"]:                      # an [[attributes]] table: the attribute replaces protected
        attribute = {"column": '"sex"', leaf: toml_value}
        body = "\n".join(f"{k} = {v}" for k, v in tables.pop("").items() if k != "protected")
        body += "\n[[attributes]]\n" + "\n".join(f"{k} = {v}" for k, v in attribute.items())
        for table, values in tables.items():
            body += f"\n[{table}]\n" + "\n".join(f"{k} = {v}" for k, v in values.items())
        path = tmp_path / "policy.toml"
        path.write_text(body + "\n")
        return path
    if key in ("faux", "testers"):                      # the whole table replaced by a value of the wrong type
        tables.pop("testers.fta")
        tables.pop("faux") if key == "faux" else None
    tables.setdefault(".".join(sections), {})[leaf] = toml_value
    lines = [f"{k} = {v}" for k, v in tables.pop("").items()]
    for table, values in tables.items():
        lines.append(f"[{table}]")
        lines += [f"{k} = {v}" for k, v in values.items()]
    path = tmp_path / "policy.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("key,toml_value,shown,toml_type,expected", list(_cases()))
def test_every_field_refuses_a_value_of_the_wrong_type(tmp_path, key, toml_value, shown, toml_type, expected):
    path = _write(tmp_path, key, toml_value)
    with pytest.raises(InputError) as info:
        load_policy(path)
    message = str(info.value)
    key = key.replace("attributes.", "attributes[0].")  # the message names the table of the array
    assert f"{key}: found {shown} ({toml_type}); expected " in message, message
    if expected is not None:
        assert f"expected {expected}" in message
    else:                                               # a Literal: the allowed values are listed
        assert "expected '" in message


def test_the_matrix_covers_every_field():
    keys = {c.values[0] for c in _cases()}
    fields = {prefix + name for prefix, model in SECTIONS.items() for name in model.model_fields}
    assert keys == fields and len(fields) >= 75


def test_the_issue_cases_exit_3_from_the_cli_naming_the_key(tmp_path, capsys):
    from faux_checks_app.cli import main

    cases = {"max_flagged_fraction": ("[faux]\ndelta = 0.1\nmax_flagged_fraction = true\n",
                                      "faux.max_flagged_fraction: found true (boolean); expected a number"),
             "min_aux_quality": ("min_aux_quality = false\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.05\n",
                                 "min_aux_quality: found false (boolean); expected a number"),
             "delta": ('[faux]\ndelta = "0.05"\nmax_flagged_fraction = 0.05\n',
                       "faux.delta: found '0.05' (string); expected a number (float or integer)")}
    for name, (body, words) in cases.items():
        path = tmp_path / f"{name}.toml"
        path.write_text('protected = "sex"\n' + body)
        code = main(["check", "--model", str(tmp_path / "absent.pt"), "--data", str(tmp_path / "absent.csv"),
                     "--protected", "sex", "--policy", str(path)])
        err = capsys.readouterr().err
        assert code == 3 and words in err, err   # a configuration mistake


def test_integers_are_numbers_but_nan_inf_and_out_of_bounds_are_not(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('protected = "sex"\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0\nridge = 0\n')
    policy = load_policy(path)
    assert policy.faux.max_flagged_fraction == 0.0 and isinstance(policy.faux.max_flagged_fraction, float)
    for body, words in [("ridge = inf", "faux.ridge: found inf (float); expected a finite number"),
                        ("ridge = nan", "faux.ridge: found nan (float); expected a finite number"),
                        ("max_undefined_fraction = 1.5", "faux.max_undefined_fraction: found 1.5 (float); expected "
                                                         "less than or equal to 1")]:
        path.write_text(f'protected = "sex"\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.05\n{body}\n')
        with pytest.raises(InputError, match=re.escape(words)):
            load_policy(path)
    for top, words in [("min_aux_quality = 1.5", "min_aux_quality: found 1.5 (float); expected less than or equal to 1"),
                       ("seed = -1", "seed: found -1 (integer); expected greater than or equal to 0")]:
        path.write_text(f'protected = "sex"\n{top}\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.05\n')
        with pytest.raises(InputError, match=re.escape(words)):
            load_policy(path)
    path.write_text('protected = "sex"\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.05\n[decision]\nconfidence = 1\n')
    with pytest.raises(InputError, match=r"decision.confidence: found 1 \(integer\); expected less than 1"):
        load_policy(path)
    path.write_text('protected = "sex"\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.05\n[aux]\nhidden = [64, true]\n')
    with pytest.raises(InputError, match=r"aux.hidden\[1\]: found true \(boolean\); expected an integer"):
        load_policy(path)


#: Keys of a shipped policy that declare the bundled data rather than choose a setting.
DECLARATIONS = {"name", "protected", "label", "favourable_label", "admissible", "testers", "linked_columns"}


@pytest.mark.parametrize("shipped", ["default", "adult"])
def test_shipped_policies_and_the_code_have_one_default_per_setting(shipped):
    payload = tomllib.loads(policy_path(shipped).read_text())
    checked = 0
    for prefix, model in SECTIONS.items():
        table = payload if prefix == "" else payload.get(prefix.rstrip("."), {})
        for name, info in model.model_fields.items():
            if (name in DECLARATIONS or name not in table or info.is_required() or prefix == "testers.fta."
                    or f"{name}." in SECTIONS):                      # a section: its fields are checked one by one
                continue
            code = info.get_default(call_default_factory=True)
            shipped_value = table[name]
            assert (tuple(shipped_value) if isinstance(shipped_value, list) else shipped_value) == code, \
                f"{shipped}.toml {prefix}{name} = {shipped_value!r} but the code's default is {code!r}"
            checked += 1
    assert checked >= 25
    assert Policy.model_fields["min_aux_quality"].default == payload["min_aux_quality"] == 0.7
    assert payload["decision"] == {"rule": "interval", "confidence": 0.95, "min_group_rows": 100, "aux_seeds": 3,
                                   "aux_seed_rows": 20000}


def test_a_policy_recorded_before_the_decision_section_still_loads():
    """Gates before the [decision] section recorded audit.min_group_rows; the audit reads it in its new place."""
    import json

    from faux_checks.gate.policy import load_policy, recorded_policy

    old = load_policy().model_dump(mode="json")
    old.pop("decision", None)
    old["audit"]["min_group_rows"] = 42
    policy = recorded_policy(json.dumps(old))
    assert policy.decision.min_group_rows == 42 and "min_group_rows" not in policy.audit.model_dump()
    old["audit"]["max_drifted_share"] = "half"
    with pytest.raises(InputError, match=r"audit.max_drifted_share: found 'half' \(string\)"):
        recorded_policy(json.dumps(old))


def _several(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "several.toml"
    path.write_text(body + '\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.05\nadmissible = ["age", "race", "hours"]\n')
    return path


def test_several_protected_attributes_and_intersections(tmp_path):
    """[[attributes]] with kinds, per-attribute admissible and linked columns, intersections."""
    path = _several(tmp_path, 'intersections = [["sex", "race"]]\n'
                    '[[attributes]]\ncolumn = "sex"\nkind = "binary"\n'
                    'linked_columns = { relationship = { Male = "Husband", Female = "Wife" } }\n'
                    '[[attributes]]\ncolumn = "race"\n'
                    '[[attributes]]\ncolumn = "age"\nkind = "continuous"\nadmissible = ["hours"]\n'
                    '[testers.linked_columns]\nthreshold = 0.1')
    policy = load_policy(path)
    assert policy.protected is None and policy.attribute_names == ["sex", "race", "age", "sex×race"]
    per = policy.attribute_policies()
    assert [(p.protected, p.protected_kind) for p in per.values()] == [
        ("sex", "binary"), ("race", None), ("age", "continuous"), ("sex×race", "multiclass")]
    assert per["sex"].faux.admissible == ("age", "race", "hours")                 # [faux] admissible as declared
    assert per["race"].faux.admissible == ("age", "hours")                         # less the attribute itself
    assert per["age"].faux.admissible == ("hours",)                                # its own declaration
    assert per["sex×race"].faux.admissible == ("age", "hours")                     # less every component
    assert per["sex"].linked_columns == {"relationship": {"Male": "Husband", "Female": "Wife"}}
    assert per["sex"].testers["linked_columns"].enabled and not per["race"].testers["linked_columns"].enabled
    assert all([a.column for a in p.attributes] == [p.protected] and not p.intersections     # a list of one
               and p.model_dump()["attributes"] == () for p in per.values())                # dumped as written
    with pytest.raises(InputError, match="the in-memory check checks one protected attribute; this policy declares "
                       "4 \\(sex, race, age, sex×race\\)"):
        policy.single_protected("the in-memory check")
    import json

    from faux_checks.gate.policy import recorded_policy

    assert recorded_policy(json.dumps(policy.model_dump(mode="json"))) == policy      # a recorded gate reloads


@pytest.mark.parametrize("body,words", [
    ('protected = "sex"\n[[attributes]]\ncolumn = "race"', "protected = 'sex' and [[attributes]] ['race'] are both set"),
    ('label = "y"', "no protected attribute: set protected"),
    ('[[attributes]]\ncolumn = "sex"\n[[attributes]]\ncolumn = "sex"', "attributes ['sex'] are declared more than once"),
    ('intersections = [["sex", "race"]]\n[[attributes]]\ncolumn = "sex"', "names ['race'], not declared"),
    ('intersections = [["sex", "sex"]]\n[[attributes]]\ncolumn = "sex"', "needs at least two different attributes"),
    ('intersections = [["sex", "age"]]\n[[attributes]]\ncolumn = "sex"\n[[attributes]]\ncolumn = "age"\n'
     'kind = "continuous"', "['age'] is continuous"),
    ('protected = "sex"\nintersections = [["sex", "race"]]', "intersections need [[attributes]]"),
    ('protected_kind = "binary"\n[[attributes]]\ncolumn = "sex"', "with [[attributes]] set each one's kind"),
    ('[linked_columns]\nrelationship = { Male = "Husband" }\n[[attributes]]\ncolumn = "sex"',
     "declare linked_columns in the attribute they belong to"),
    ('[[attributes]]\ncolumn = "sex"\nadmissible = ["sex"]', "'sex' cannot be admissible"),
    ('[[attributes]]\ncolumn = "sex"\nlinked_columns = { sex = { Male = "M" } }', "cannot be one of its own linked"),
    ('[[attributes]]\ncolumn = "sex"\n[testers.linked_columns]\nthreshold = 0.1',
     "no attribute declares linked_columns"),
    ('[[attributes]]\ncolumn = "sex"\nweight = 2', "attributes[0].weight: unknown key"),
    ('[[attributes]]\ncolumn = ""', "attributes[0].column: found '' (string)"),
])
def test_several_attributes_refuse_what_is_ambiguous(tmp_path, body, words):
    with pytest.raises(InputError) as info:
        load_policy(_several(tmp_path, body))
    assert words in str(info.value), str(info.value)


def test_a_single_attribute_policy_keeps_its_hash():
    """attributes/intersections left empty do not enter the hash: recorded decisions still match their policy."""
    policy = load_policy(policy_path("adult"))
    assert policy.attribute_policies() == {"sex": policy} and policy.attribute_names == ["sex"]
    payload = policy.model_dump(mode="json")
    del payload["attributes"], payload["intersections"], payload["operations"]   # operations never count
    assert payload["decision"].pop("max_newly_flagged_fraction") is None           # an unset no-new-harm rule neither
    assert payload.pop("positive_label") is None                                   # unset: as before it existed
    assert payload.pop("protected_file") is None                                   # no linked protected file neither
    assert payload.pop("protected_probabilities") is None                          # nor estimated probabilities
    assert payload["favourable_label"] == "1"                                      # set: it counts
    assert payload["scale"].pop("device") == "auto"                                # the device never counts
    assert payload.pop("missing_values") == "auto"                                 # defaults added later: not counted
    assert payload["aux"].pop("cross_fit_folds") == 5
    assert payload["faux"].pop("unit") is None                                     # a classifier's δ has no unit
    import hashlib
    import json

    assert policy.sha256() == hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def test_setting_the_no_new_harm_rule_changes_the_hash(tmp_path):
    base = load_policy(policy_path("adult"))
    text = policy_path("adult").read_text().replace("\n[decision]\n", "\n[decision]\nmax_newly_flagged_fraction = 0.01\n", 1)
    (tmp_path / "p.toml").write_text(text)
    changed = load_policy(tmp_path / "p.toml")
    assert changed.decision.max_newly_flagged_fraction == 0.01 and changed.sha256() != base.sha256()
