"""What the gate flow records about a decision: the records beside its report, the evidence pack, the MLflow run's
metrics and the version tags' contents (built as :mod:`faux_checks.registry.records` types; the codec spells the
tag names). Pure helpers of :func:`faux_checks_flows.gate.record`, split out of :mod:`faux_checks_flows.gate`.
"""

from __future__ import annotations

from pathlib import Path

#: The artifact folder of a gate run holding its records (registry/trail.py ``RECORDS_FOLDER``).
RECORDS = "records"


def undecided_cause(outcome) -> str:
    """``fairness_undecided_cause``: ``no_check`` for an undecided whose check never ran (configuration or loading;
    re-gated by the next run with another policy or data, :meth:`~faux_checks.registry.Registry.gate_plan`), else ""."""
    from faux_checks.registry.records import NO_CHECK

    return NO_CHECK if outcome.decision == "undecided" and not outcome.check else ""


def write_evidence(report_dir: str, sources: dict, signing_key: str | None, model_name: str, version: str,
                    tracking_uri: str | None) -> Path:
    """``evidence.json`` over the report, every record and the inputs (model, spec, data), whole (rewritten on a retry)."""
    import json

    from faux_checks.report.evidence import build_evidence, write_evidence_pack

    folder = Path(report_dir)
    files: dict[str, str] = {role: str(p) for role, p in sources.items() if p}
    files.update(report=str(folder / "report.json"), report_html=str(folder / "report.html"))
    for path in sorted((folder / RECORDS).rglob("*")):
        if path.is_file():
            files[f"records/{path.relative_to(folder / RECORDS).as_posix()}"] = str(path)
    report = json.loads((folder / "report.json").read_text())
    evidence = build_evidence(report=report, files=files, pack_dir=folder,
                              extra={"model_name": model_name, "version": str(version),
                                     "registry": _redacted_uri(tracking_uri)})
    return write_evidence_pack(folder, evidence, signing_key=signing_key, replace=True)


def _redacted_uri(uri: str | None) -> str | None:
    """A tracking URI without its credentials (``user:password@``), as an evidence pack may be shared."""
    import re

    return None if uri is None else re.sub(r"//[^/@]*@", "//", uri)


def regression_fields(comparisons: list[dict]) -> dict:
    """The churn fields of :class:`~faux_checks.registry.records.GateProvenance` (tags ``fairness_churn_*``: newly
    flagged / resolved rows against the previous version, the history's churn) and ``compared_with`` (the deployed
    version the no-new-harm rule read). None when not compared, so a re-gate never keeps an earlier comparison's tags."""
    by_role = {c.get("role"): c for c in comparisons}
    previous, deployed = by_role.get("previous") or {}, by_role.get("deployed") or {}
    change = previous.get("change") or {}
    return {"compared_with": deployed.get("compared_with") if deployed.get("change") else None,
            "churn_against": previous.get("compared_with") if change else None,
            "churn_newly_flagged": change.get("newly_flagged"), "churn_resolved": change.get("resolved"),
            "churn_n": change.get("n")}


def record_uris(run_id: str, records: dict[str, str]) -> dict[str, str | None]:
    """Record name -> ``runs:/<run_id>/records/<file>`` (tags ``fairness_<record>_uri``); a record this run lacks is
    None (written empty), so that a re-gate never leaves a tag pointing at an earlier run's artifact."""
    from faux_checks.report.records import RECORD_FILES

    uris: dict[str, str | None] = {name: None for name in (*RECORD_FILES, "policy", "gx_result")}
    uris.update({name: f"runs:/{run_id}/{RECORDS}/{file}" for name, file in records.items()})
    return uris


def whole_policy(outcome) -> dict:
    """``policy`` and ``policy_sha256`` for the report of a gate that records its whole policy (empty otherwise)."""
    policy = dict(getattr(outcome, "policy", None) or {})
    if not policy:
        return {}
    sha256 = policy.pop("sha256", None)
    return {"policy": policy, "policy_sha256": sha256}


def given_policy(check: dict, policy_path: str | None) -> dict:
    """The policy the gate was given, for a report whose check did not run (an undecided page
    showed "No policy recorded"); empty when the check recorded its own, or when the file cannot be read."""
    if (check.get("provenance") or {}).get("policy"):
        return {}
    from faux_checks.gate.policy import load_policy

    try:
        policy = load_policy(policy_path)
    except Exception:    # noqa: BLE001 - the policy itself was the problem: the reasons say so
        return {}
    return {"policy": policy.model_dump(mode="json"), "policy_sha256": policy.sha256()}


def attribute_metrics(attributes: list[dict]) -> dict[str, float]:
    """Run metrics of each protected attribute: ``attributes/<key>/flagged_fraction`` (and ``_lower``, ``_upper``)."""
    metrics = {}
    for a in attributes:
        interval = a.get("interval") or {}
        for name, value in (("flagged_fraction", a.get("flagged_fraction")), ("flagged_fraction_lower", interval.get("lower")),
                            ("flagged_fraction_upper", interval.get("upper")), ("aux_quality", a.get("aux_quality"))):
            if isinstance(value, (int, float)):
                metrics[f"attributes/{a['key']}/{name}"] = value
    return metrics


def attribute_tags(attributes: list[dict], check: dict) -> dict:
    """Version tags of the gate's attributes (one or several; none when the outcome has no sections).

    ``fairness_attributes``: the attributes, comma-separated; ``fairness_deciding_attribute``: the one
    whose check the headline tags (``fairness_flagged_fraction``, ...) carry; per attribute (its
    :func:`~faux_checks.gate.attributes.attribute_key`) ``fairness_attr_<key>_decision``,
    ``_flagged_fraction``, ``_flagged_fraction_lower``, ``_flagged_fraction_upper``, ``_aux_quality``.
    """
    from faux_checks.registry.records import AttributeRecord, attribute_set_tags

    if not attributes:
        return {}
    deciding = ((check or {}).get("provenance") or {}).get("policy", {}).get("protected")
    records = [AttributeRecord(key=a["key"], decision=a.get("decision"), flagged_fraction=a.get("flagged_fraction"),
                               flagged_fraction_lower=(a.get("interval") or {}).get("lower"),
                               flagged_fraction_upper=(a.get("interval") or {}).get("upper"),
                               aux_quality=a.get("aux_quality")) for a in attributes]
    return attribute_set_tags([a["attribute"] for a in attributes], deciding, records)


def write_records(folder: Path, outcome, policy_path: str | None) -> dict[str, str]:
    """The gate's records beside its report: name -> file name inside ``folder``.

    Several protected attributes: each attribute's check records are in ``<attribute key>/``, named
    ``attr_<key>_<record>`` (version tags ``fairness_attr_<key>_<record>_uri``).

    ``scores`` / ``by_group`` / ``aux_model`` (+ ``aux_model_info``) come from the check (written by the
    fAux expectation, :mod:`faux_checks.report.records`); added here: ``policy`` (the policy file as
    given, or the shipped default) and ``gx_result`` (GX's validation result), each written whole
    (:func:`faux_checks._files.write_whole`); a retry rewrites them.
    """
    import json

    from faux_checks._files import write_whole
    from faux_checks.gate.policy import policy_path as shipped_policy
    from faux_checks.report.records import RECORD_FILES

    folder.mkdir(parents=True, exist_ok=True)
    source = Path(policy_path) if policy_path else shipped_policy("default")
    policy_copy = folder / f"policy{source.suffix or '.toml'}"
    if source.is_file():
        write_whole(policy_copy, source.read_bytes())
    gx = folder / "gx_validation.json"
    if getattr(outcome, "gx_result", None) is not None:
        write_whole(gx, json.dumps(outcome.gx_result, indent=1, default=str))
    files = {**RECORD_FILES, "policy": policy_copy.name, "gx_result": gx.name}
    found = {name: file for name, file in files.items() if (folder / file).is_file()}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):  # several attributes: records/<attribute key>/
        found.update({f"attr_{sub.name}_{name}": f"{sub.name}/{file}" for name, file in RECORD_FILES.items()
                      if (sub / file).is_file()})
    return found


def group_metrics(check: dict, attributes: list[dict] | None = None) -> dict[str, float]:
    """Per-group MLflow metrics: ``flagged_fraction.<group>``, ``flagged_fraction_defined.<group>``, ``n.<group>``
    (group names made key-safe); with the gate's attribute sections: ``attributes/<key>/flagged_fraction.<group>``, ... each."""
    if attributes:
        return {f"attributes/{a['key']}/{name}": value for a in attributes
                for name, value in group_metrics(a.get("check") or {}).items()}
    out: dict[str, float] = {}
    for row in check.get("by_group") or []:
        key = "".join(ch if ch.isalnum() or ch in "-_. " else "_" for ch in str(row.get("group")))[:200] or "_"
        for name in ("flagged_fraction", "flagged_fraction_defined", "n"):
            if isinstance(row.get(name), (int, float)):
                out[f"{name}.{key}"] = row[name]
    return out


def policy_tags(check: dict, policy_path: str | None, outcome=None) -> tuple[str | None, str | None]:
    """The sha256 and name of the policy that decided, also when the check did not run (version tags
    ``fairness_policy_sha256`` / ``fairness_policy_name``, :class:`~faux_checks.registry.records.GateProvenance`).

    Several attributes: the whole policy's hash (each attribute's check records its own single-attribute one).
    """
    provenance = check.get("provenance") or {}
    whole = getattr(outcome, "policy", None) or {}
    sha = whole.get("sha256") or provenance.get("policy_sha256")
    name = whole.get("name") or provenance.get("policy_name")
    if not sha:
        try:
            from faux_checks.gate.policy import load_policy

            policy = load_policy(policy_path)
            sha, name = policy.sha256(), policy.name
        except Exception:  # noqa: BLE001 - an unreadable policy is already the recorded reason
            sha = name = None
    return sha, name


def aux_key_tag(check: dict, records: dict[str, str], attributes: list) -> dict[str, str]:
    """``fairness_aux_key``: the key of the run's one recorded auxiliary model (a gate over one attribute; none with
    several, whose records are per attribute);
    ``fairness_aux_seed_keys``: ``"<seed>:<key> ..."`` of its recorded extra seeds (restored by a re-gate too)."""
    from faux_checks.registry.records import AUX_KEY_TAG, AUX_SEED_KEYS_TAG

    provenance = check.get("provenance") or {}
    key = provenance.get("aux_key")
    if not (key and "aux_model" in records and len(attributes) <= 1):
        return {}
    seeds = " ".join(f"{k}:{v}" for k, v in (provenance.get("aux_seed_keys") or {}).items() if v)
    return {AUX_KEY_TAG: key, **({AUX_SEED_KEYS_TAG: seeds} if seeds else {})}
