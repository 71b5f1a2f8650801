"""Verification of an evidence pack (:mod:`faux_checks.report.evidence`): what a reviewer can trust in it, and why.

:func:`verify_pack` checks, each as one :class:`PackCheck`:

- every file the pack hashes (its sha256 now against the one signed; the model file's check says when it was
  read at its recorded path only, not where the reviewer's copy is);
- the decision: the pack's ``decision``, ``exit_code``, ``rule``, ``rules``, ``model`` and ``policy_sha256`` against
  the ``report.json`` it hashes (parsed; :func:`faux_checks.report.evidence.decision_fields` reads both);
- the envelope: ``evidence.json`` holds ``evidence`` and ``signature`` only, the signature its four fields only
  (nothing outside what is signed can carry a claim);
- the folder: no file beside the pack that the pack does not list;
- the signature: Ed25519 over the canonical JSON, by the pinned key when one is given (an unsigned pack never
  passes a pinned check), its fingerprint computed from the key in the pack, never read from the pack's claim.

The result has one of four outcomes (:attr:`PackVerification.outcome`): ``verified`` (the signer pinned),
``integrity-only`` (signed, checked with the key inside the pack: anyone can re-sign an edited pack),
``unsigned`` (accepted with ``allow_unsigned``) and ``failed``. Every string from a pack reaches the caller
through :func:`faux_checks.report._format.printable` in :meth:`PackVerification.lines` and
:meth:`PackVerification.summary` (an escape sequence in a recorded path cannot redraw the terminal).

Signatures: Ed25519 (RFC 8032) through ``cryptography``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..errors import InputError
from ._format import printable
from .evidence import (EVIDENCE_FILE, EVIDENCE_SCHEMA, canonical_bytes, decision_fields, embedded_public_key,
                       file_sha256, key_fingerprint, load_public_key)

__all__ = ["ENVELOPE_KEYS", "MAX_FOLDER_FILES", "OUTCOMES", "SIGNATURE_KEYS", "PackCheck", "PackVerification",
           "verify_pack"]

#: The keys of ``evidence.json``: the signed object and its signature; any other key fails the check.
ENVELOPE_KEYS = frozenset({"evidence", "signature"})
#: The keys of the ``signature`` object (:func:`faux_checks.report.evidence.sign_evidence`).
SIGNATURE_KEYS = frozenset({"algorithm", "public_key", "fingerprint", "value"})
#: Most files looked at in a pack's folder when listing the files it does not hash.
MAX_FOLDER_FILES = 10_000
#: The outcomes of a verification, strongest first.
OUTCOMES = ("verified", "integrity-only", "unsigned", "failed")


@dataclass(frozen=True)
class PackCheck:
    """One line of a verification: what was checked, ``ok`` / ``failed`` / ``missing``, and why."""

    item: str
    status: str
    detail: str


@dataclass(frozen=True)
class PackVerification:
    """Result of :func:`verify_pack`.

    ``signed``: the pack has a signature block; ``pinned``: the reviewer gave the signer's key; ``model``: the
    signed ``model`` object (name, version, sha256...); ``key_fingerprint``: sha256 of the key in the pack,
    computed from that key (None when unsigned or unreadable).
    """

    pack: str
    decision: str | None
    signed: bool
    pinned: bool
    checks: list[PackCheck] = field(default_factory=list)
    model: dict = field(default_factory=dict)
    key_fingerprint: str | None = None

    @property
    def ok(self) -> bool:
        """Every check holds (whatever the signer: see :attr:`outcome`)."""
        return bool(self.checks) and all(c.status == "ok" for c in self.checks)

    @property
    def outcome(self) -> str:
        """``verified`` (all hold, the signer pinned), ``integrity-only`` (all hold, checked with the pack's own key),
        ``unsigned`` (all hold, no signature, accepted with ``allow_unsigned``) or ``failed``."""
        if not self.ok:
            return "failed"
        if not self.signed:
            return "unsigned"
        return "verified" if self.pinned else "integrity-only"

    def accepted(self, *, trust_embedded_key: bool = False) -> bool:
        """Whether a reviewer may rely on the pack: ``verified``, ``unsigned`` (the caller asked for hashes only
        with ``allow_unsigned``), and ``integrity-only`` only with ``trust_embedded_key``."""
        return self.outcome in ("verified", "unsigned") or (self.outcome == "integrity-only" and trust_embedded_key)

    def model_identity(self) -> str:
        """The model as the pack records it: name (else its file's name), version and sha256 (escaped for a terminal)."""
        m = self.model
        name = m.get("name") if m.get("name") is not None else Path(str(m.get("path") or "unnamed")).name
        parts = [str(name)]
        if m.get("version") is not None:
            parts.append(f"version {m['version']}")
        if m.get("sha256"):
            parts.append(f"sha256 {str(m['sha256'])[:16]}…")
        return printable(" ".join(parts))

    def lines(self) -> list[str]:
        """One line per check, ``status  item: detail``, control characters escaped."""
        return [printable(f"{c.status:>7}  {c.item}: {c.detail}") for c in self.checks]

    def summary(self) -> str:
        """The final line: what holds, and how far the signer is known (escaped for a terminal)."""
        fp = f"{self.key_fingerprint[:16]}…" if self.key_fingerprint else "?"
        if self.outcome == "verified":
            text = f"verified: every file matches, the decision is the report's, and the pinned key {fp} signed it"
        elif self.outcome == "integrity-only":
            text = (f"integrity only, signer NOT pinned: every file matches what the pack signs, but it was checked "
                    f"with the key inside the pack ({fp}); anyone can re-sign an edited pack. Pin the signer with "
                    f"--public-key PEM")
        elif self.outcome == "unsigned":
            text = "hashes match; the pack is NOT signed (anyone could have written it)"
        else:
            failed = [c for c in self.checks if c.status != "ok"]
            text = f"NOT verified: {len(failed)} of {len(self.checks)} checks did not hold"
        return printable(text)


def _read_pack(path: Path) -> tuple[dict, dict, dict]:
    try:
        payload = json.loads(path.read_text())
        evidence = payload["evidence"]
        recorded = evidence["files"]
        if not isinstance(payload, dict) or not isinstance(evidence, dict) or not isinstance(recorded, dict):
            raise TypeError("evidence, or its files, is not an object")
    except FileNotFoundError:
        raise InputError(f"{path}: no evidence pack there (a gate run writes {EVIDENCE_FILE} beside report.json)") from None
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise InputError(f"{path}: not an evidence pack ({type(exc).__name__}: {exc})") from None
    if evidence.get("schema") != EVIDENCE_SCHEMA:
        raise InputError(f"{path}: schema {evidence.get('schema')!r}, this version reads {EVIDENCE_SCHEMA!r}")
    return payload, evidence, recorded


def verify_pack(pack: str | Path, *, public_key: str | Path | None = None, files: Mapping[str, str | Path] | None = None,
                allow_unsigned: bool = False) -> PackVerification:
    """Re-hash every file of an evidence pack, check its decision against its report, its folder and its signature.

    Parameters
    ----------
    pack : path
        ``evidence.json`` or the folder holding it.
    public_key : path or base64, optional
        The signer's public key as the reviewer knows it (PEM file, or base64 of the raw 32 bytes): pins the
        signer; an unsigned pack then fails, ``allow_unsigned`` or not. Without it the pack's own key is used:
        the outcome is at best ``integrity-only``.
    files : mapping role -> path, optional
        Where to find a file now (e.g. the model file on the reviewer's machine); default the recorded path
        (relative paths from the pack's folder).
    allow_unsigned : bool
        Accept a pack without a signature when no signer is pinned (the files are still re-hashed).

    Returns
    -------
    PackVerification
        One check per file (``ok``, ``failed``: another hash, ``missing``: not found), one for the decision against
        the report, one per unlisted file or envelope key, one for the signature.

    Raises
    ------
    InputError
        The pack cannot be read as an evidence pack, ``files`` names a role the pack does not hold, or the
        ``public_key`` given cannot be read (no such file, unreadable, not an Ed25519 key): unusable input.
    """
    pinned = load_public_key(public_key) if public_key is not None else None
    path = Path(pack)
    if path.is_dir():
        path = path / EVIDENCE_FILE
    payload, evidence, recorded = _read_pack(path)
    overrides = {str(k): Path(v) for k, v in (files or {}).items()}
    unknown = sorted(set(overrides) - set(recorded))
    if unknown:
        raise InputError(f"--file names {unknown}, but the pack holds {sorted(recorded)}")
    located = {role: _where(path, entry, overrides.get(role)) for role, entry in sorted(recorded.items())}
    checks = [_file_check(role, located[role], recorded[role], role in overrides) for role in located]
    checks.append(_decision_check(evidence, recorded, located))
    checks += _envelope_checks(payload)
    checks += _unlisted_checks(path, recorded, located)
    signature = payload.get("signature")
    fingerprint = None
    if not signature:
        checks.append(_unsigned_check(pinned is not None, allow_unsigned))
    else:
        check, fingerprint = _signature_check(evidence, signature, pinned)
        checks.append(check)
    model = evidence.get("model")
    return PackVerification(pack=str(path), decision=evidence.get("decision"), signed=bool(signature),
                            pinned=pinned is not None, checks=checks, key_fingerprint=fingerprint,
                            model=dict(model) if isinstance(model, dict) else {})


def _where(pack: Path, entry: object, override: Path | None) -> Path | None:
    if override is not None:
        return override
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        return None
    return pack.parent / entry["path"] if entry.get("relative") else Path(entry["path"])


def _file_check(role: str, where: Path | None, entry: object, overridden: bool) -> PackCheck:
    if where is None or not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
        return PackCheck(role, "failed", "the pack's entry for this file has no path or sha256")
    if not where.is_file():
        return PackCheck(role, "missing", f"{where} not found; pass --file {role}=PATH where it is now")
    digest = file_sha256(where)
    at_recorded = (role == "model" and not overridden)
    note = ("; checked at its recorded path only: pass --file model=PATH to check the file you deploy"
            if at_recorded else "")
    if digest != entry["sha256"]:
        return PackCheck(role, "failed", f"{where}: sha256 {digest[:16]}…, the pack recorded {entry['sha256'][:16]}… "
                                         f"(the file changed since the decision){note}")
    return PackCheck(role, "ok", f"{where} sha256 {digest[:16]}…{note}")


def _report_role(recorded: Mapping) -> str | None:
    """The role of the pack's ``report.json``: ``report`` (gate, check) or the file's name (audit)."""
    if "report" in recorded:
        return "report"
    return next((role for role, e in recorded.items()
                 if isinstance(e, dict) and e.get("relative") and e.get("path") == "report.json"), None)


def _decision_check(evidence: Mapping, recorded: Mapping, located: Mapping[str, Path | None]) -> PackCheck:
    role = _report_role(recorded)
    if role is None:
        return PackCheck("decision", "failed", "the pack hashes no report.json, so its decision cannot be checked "
                                               "against the report it was made from")
    where = located.get(role)
    try:
        report = json.loads(Path(where).read_text()) if where is not None else None
    except (OSError, ValueError) as exc:
        return PackCheck("decision", "failed", f"the report {where} cannot be read as JSON ({type(exc).__name__}), "
                                               "so the pack's decision cannot be checked against it")
    if not isinstance(report, dict):
        return PackCheck("decision", "failed", f"the report {where} is not a report object")
    expected = decision_fields(report)

    def same(key: str) -> bool:
        return json.dumps(expected[key], sort_keys=True) == json.dumps(evidence.get(key), sort_keys=True)
    differ = [key for key in expected if not same(key)]
    if differ:
        return PackCheck("decision", "failed", f"the pack's {', '.join(differ)} differ from the report it hashes "
                                               f"({where}): the pack says {evidence.get('decision')!r} (exit code "
                                               f"{evidence.get('exit_code')!r}), the report {expected['decision']!r} "
                                               f"(exit code {expected['exit_code']!r})")
    return PackCheck("decision", "ok", f"{expected['decision']}, exit code {expected['exit_code']} and "
                                       f"{len(expected['rules'])} rules as in {where}")


def _envelope_checks(payload: Mapping) -> list[PackCheck]:
    out: list[PackCheck] = []
    extra = sorted(str(k) for k in set(payload) - ENVELOPE_KEYS)
    if extra:
        out.append(PackCheck("envelope", "failed", f"evidence.json holds keys outside the signed evidence: {extra} "
                                                   "(nothing unsigned may sit beside it)"))
    signature = payload.get("signature")
    if isinstance(signature, dict) and set(signature) - SIGNATURE_KEYS:
        out.append(PackCheck("envelope", "failed", f"the signature block holds unknown keys "
                                                   f"{sorted(str(k) for k in set(signature) - SIGNATURE_KEYS)}"))
    elif signature is not None and not isinstance(signature, dict):
        out.append(PackCheck("envelope", "failed", f"the signature is a {type(signature).__name__}, not an object"))
    return out


def _unlisted_checks(pack: Path, recorded: Mapping, located: Mapping[str, Path | None]) -> list[PackCheck]:
    folder = pack.parent
    listed = {pack.resolve()}
    for role, entry in recorded.items():
        for where in (located.get(role), _where(pack, entry, None)):
            if where is not None:
                listed.add(where.resolve())
    out: list[PackCheck] = []
    for n, p in enumerate(sorted(folder.rglob("*"))):
        if n >= MAX_FOLDER_FILES:
            return out + [PackCheck("unlisted file", "failed", f"the pack's folder {folder} holds more than "
                                                               f"{MAX_FOLDER_FILES:,} entries: a pack folder holds "
                                                               "its run only")]
        if p.is_file() and p.resolve() not in listed:
            out.append(PackCheck("unlisted file", "failed", f"{p.relative_to(folder).as_posix()} is in the pack's "
                                                            "folder but not in the signed evidence (added after the "
                                                            "decision, or not part of it)"))
    return out


def _unsigned_check(pinned: bool, allow_unsigned: bool) -> PackCheck:
    if pinned:
        return PackCheck("signature", "failed", "the pack is not signed, but --public-key pins a signer: an unsigned "
                                                "pack never passes a pinned check (--allow-unsigned does not apply)")
    if allow_unsigned:
        return PackCheck("signature", "ok", "the pack is NOT signed (accepted: --allow-unsigned, hashes only)")
    return PackCheck("signature", "failed", "the pack is not signed; anyone could have written it (sign with "
                                            "--signing-key, or pass --allow-unsigned to check the hashes only)")


def _signature_check(evidence: Mapping, signature: object, pinned) -> tuple[PackCheck, str | None]:
    from cryptography.exceptions import InvalidSignature

    if not isinstance(signature, dict):
        return PackCheck("signature", "failed", "unreadable signature block (not an object)"), None
    if signature.get("algorithm") != "Ed25519":
        return PackCheck("signature", "failed", f"algorithm {signature.get('algorithm')!r}; only Ed25519 is read"), None
    try:
        embedded = embedded_public_key(signature.get("public_key"))
        value = base64.b64decode(str(signature.get("value")), validate=True)
    except (InputError, ValueError) as exc:
        return PackCheck("signature", "failed", f"unreadable signature block ({exc})"), None
    actual = key_fingerprint(embedded)
    if pinned is not None and key_fingerprint(pinned) != actual:
        return PackCheck("signature", "failed", f"signed by key {actual} (the key in the pack), not by the pinned "
                                                f"key {key_fingerprint(pinned)}"), actual
    try:
        embedded.verify(value, canonical_bytes(evidence))
    except (InvalidSignature, ValueError, TypeError):
        return PackCheck("signature", "failed", "the signature does not match the evidence (the pack was edited after "
                                                "signing, or signed by another key)"), actual
    if signature.get("fingerprint") != actual:
        return PackCheck("signature", "failed", f"the pack's fingerprint field {str(signature.get('fingerprint'))[:64]!r} "
                                                f"is not that of its key ({actual})"), actual
    how = "the pinned public key" if pinned is not None else \
        "the key in the pack (integrity only: pin the signer with --public-key)"
    return PackCheck("signature", "ok", f"Ed25519, key {actual[:16]}…, checked with {how}"), actual
