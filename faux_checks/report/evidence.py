"""The evidence pack of a decision: content hashes of everything it was made from, signed, and its verification.

``evidence.json`` beside ``report.json`` states what a reviewer needs to re-check a decision without trusting
the machine that made it: the sha256 of the model file, the audit data, the feature spec, the policy, the
report itself and the records, the code that ran (the version and a hash of the ``faux_checks`` source
files), the decision and every rule with its status. With a signing key (an Ed25519 private key in PEM,
e.g. ``faux-checks keygen``) the pack carries a signature over its canonical JSON;
:func:`faux_checks.report.verify.verify_pack` re-hashes every file, checks the decision against the report it
hashes and checks the signature (against a public key the reviewer pins, or the one in the pack: integrity only).

Signatures: Ed25519 (RFC 8032) through ``cryptography``; canonical JSON: keys sorted, no whitespace,
ASCII (what is signed is exactly :func:`canonical_bytes` of the ``evidence`` object).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Mapping

from ..errors import InputError
from ..provenance import file_sha256 as sha256_of_file
from ..provenance import installed_versions, utc_now

__all__ = ["EVIDENCE_FILE", "EVIDENCE_SCHEMA", "KEY_PASSWORD_ENV", "SIGNING_KEY_ENV", "build_evidence",
           "canonical_bytes", "code_sha256", "decision_fields", "embedded_public_key", "file_sha256", "generate_key",
           "key_fingerprint", "load_private_key", "load_public_key", "sign_evidence", "signing_key_path",
           "write_evidence_pack"]

#: The pack's file name in a run folder.
EVIDENCE_FILE = "evidence.json"
#: The pack's format name and version.
EVIDENCE_SCHEMA = "faux-checks-evidence/1"
#: Environment variable holding the signing key's passphrase, when the PEM is encrypted.
KEY_PASSWORD_ENV = "FAUX_CHECKS_SIGNING_KEY_PASSWORD"

#: Environment variable naming the signing key (a PEM file) when a command is given none.
SIGNING_KEY_ENV = "FAUX_CHECKS_SIGNING_KEY"



def signing_key_path(path: str | Path | None, *, check: bool = True) -> str | None:
    """The signing key to use: ``path``, else ``$FAUX_CHECKS_SIGNING_KEY``, else None (unsigned packs).

    With ``check`` the key is loaded once (:func:`load_private_key`), so that a wrong path or passphrase stops a
    command before it decides anything rather than after.
    """
    chosen = str(path) if path else (os.environ.get(SIGNING_KEY_ENV) or None)
    if chosen is not None and check:
        load_private_key(chosen)
    return chosen


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (any size).

    Raises
    ------
    InputError
        The file does not exist or is not a file.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file to hash")
    return sha256_of_file(path)


def code_sha256() -> str:
    """Hex sha256 over the ``faux_checks`` package's ``.py``/``.toml``/``.j2``/``.json`` files (relative path and bytes, sorted).

    The code version as it ran, whether installed from a wheel or an editable checkout (a version string
    alone does not tell two edited checkouts apart).
    """
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".py", ".toml", ".j2", ".json") and "__pycache__" not in p.parts:
            h.update(p.relative_to(root).as_posix().encode())
            h.update(b"\0")
            h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def canonical_bytes(obj) -> bytes:
    """The bytes that are signed: JSON with sorted keys, no whitespace, ASCII only, no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def decision_fields(report: Mapping) -> dict:
    """What a pack states about the decision, read from a report: ``decision``, ``exit_code``, ``rule``, ``rules``
    (rule, status, value, limit, detail of each), ``model`` (its scalar fields: name, version, sha256...) and
    ``policy_sha256``. :func:`build_evidence` stores these; the verification reads them again from the hashed
    ``report.json`` and compares."""
    rules = [{k: r.get(k) for k in ("rule", "status", "value", "limit", "detail") if k in r}
             for r in report.get("rules") or [] if isinstance(r, Mapping)]
    model = report.get("model")
    return {
        "decision": report.get("decision"),
        "exit_code": report.get("exit_code"),
        "rule": report.get("rule"),
        "rules": rules,
        "model": {k: v for k, v in dict(model if isinstance(model, Mapping) else {}).items()
                  if isinstance(v, (str, int, float, bool))},
        "policy_sha256": report.get("policy_sha256"),
    }


def _entry(role: str, path: Path, pack_dir: Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"evidence: the {role} file {path} does not exist; the pack hashes only files that are there")
    resolved = path.resolve()
    try:
        where = resolved.relative_to(pack_dir.resolve()).as_posix()
        relative = True
    except ValueError:
        where, relative = str(resolved), False
    return {"path": where, "relative": relative, "sha256": file_sha256(resolved), "bytes": resolved.stat().st_size}


def build_evidence(*, report: Mapping, files: Mapping[str, str | Path], pack_dir: str | Path,
                   extra: Mapping | None = None) -> dict:
    """The ``evidence`` object of a pack (unsigned).

    Parameters
    ----------
    report : mapping
        The run's ``report.json`` content (its ``decision``, ``exit_code``, ``rules``, ``model``, ``policy_sha256``).
    files : mapping role -> path
        What the decision was made from and what it wrote: ``model``, ``data``, ``spec``, ``policy``,
        ``report``, records... Paths inside ``pack_dir`` are stored relative to it (the folder can move).
    pack_dir : path
        The folder ``evidence.json`` goes into.
    extra : mapping, optional
        More JSON values stored under ``context`` (e.g. the registry URI, the model name and version).

    Returns
    -------
    dict
        ``schema``, ``created_at``, ``decision``, ``exit_code``, ``rules`` (rule, status, value, limit),
        ``files`` (role -> path, relative, sha256, bytes), ``code`` (versions, source hash), ``context``.

    Raises
    ------
    InputError
        A file named in ``files`` does not exist, or ``report`` has no decision.
    """
    if "decision" not in report:
        raise InputError("evidence: the report has no decision; a pack is written only for a decided run")
    pack_dir = Path(pack_dir)
    versions = installed_versions(["faux-checks", "torch", "numpy", "pandas", "scikit-learn", "mlflow",
                                   "great-expectations", "prefect"])
    return {
        "schema": EVIDENCE_SCHEMA,
        "created_at": utc_now(),
        **decision_fields(report),
        "files": {str(role): _entry(str(role), Path(p), pack_dir) for role, p in files.items() if p is not None},
        "code": {"versions": versions, "faux_checks_source_sha256": code_sha256()},
        "context": dict(extra or {}),
    }


def generate_key(path: str | Path) -> tuple[Path, Path]:
    """Write a new Ed25519 private key (PEM, PKCS8, unencrypted, mode 0600) and its public key (``.pub``, PEM, mode
    0644), each mode set explicitly whatever the process's umask.

    Raises
    ------
    InputError
        Either file exists already (a key is never overwritten).
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = Path(path)
    pub = path.with_name(path.name + ".pub")
    for p in (path, pub):
        if p.exists():
            raise InputError(f"{p} exists already; choose another path (a key is never overwritten)")
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_new(path, private, 0o600)
    _write_new(pub, public, 0o644)
    return path, pub


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` (never an existing file) with exactly ``mode``: the umask only narrows ``os.open``'s mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fh.fileno(), mode)
        fh.write(data)


def load_private_key(path: str | Path):
    """An Ed25519 private key from a PEM file (passphrase from ``FAUX_CHECKS_SIGNING_KEY_PASSWORD`` when encrypted).

    Raises
    ------
    InputError
        No such file, not a PEM private key, a wrong or missing passphrase, or not an Ed25519 key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = Path(path)
    if not path.is_file():
        raise InputError(f"signing key {path}: no such file (make one with `faux-checks keygen PATH`)")
    password = os.environ.get(KEY_PASSWORD_ENV)
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise InputError(f"signing key {path}: not a readable PEM private key ({exc}); an encrypted key needs its "
                         f"passphrase in {KEY_PASSWORD_ENV}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"signing key {path}: a {type(key).__name__}, but evidence packs are signed with Ed25519 "
                         f"(make one with `faux-checks keygen PATH` or `openssl genpkey -algorithm ed25519`)")
    return key


def load_public_key(source: str | Path | bytes):
    """An Ed25519 public key from a PEM file, PEM bytes, or a base64 raw key (32 bytes).

    A ``str`` or ``Path`` naming a file is read as PEM; any other ``str`` must be a base64 raw key.

    Raises
    ------
    InputError
        No such file (and not a base64 raw key), a file that cannot be read (the path and the reason), or not
        an Ed25519 public key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if isinstance(source, bytes):
        raw = source
    else:
        path = Path(str(source))
        if not path.exists():
            try:
                return embedded_public_key(str(source))
            except InputError:
                raise InputError(f"public key {str(source)[:200]!r}: no such file, and not a base64 raw Ed25519 "
                                 "public key (give the signer's PEM file, e.g. keys/gate.pem.pub)") from None
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise InputError(f"public key {path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        key = serialization.load_pem_public_key(raw)
    except (ValueError, TypeError) as exc:
        raise InputError(f"public key {str(source)[:200]!r}: not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"public key {str(source)[:200]!r}: a {type(key).__name__}, expected Ed25519")
    return key


def embedded_public_key(value: object):
    """The Ed25519 public key of a pack's ``signature.public_key`` (base64 of the 32 raw bytes; never a path).

    Raises
    ------
    InputError
        Not base64 of a 32-byte Ed25519 public key.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(str(value), validate=True))
    except (ValueError, TypeError) as exc:
        raise InputError(f"not a base64 raw Ed25519 public key ({exc})") from None


def key_fingerprint(key) -> str:
    """Hex sha256 of an Ed25519 public key's 32 raw bytes (what ``faux-checks keygen`` keys are known by)."""
    return hashlib.sha256(_raw_public(key)).hexdigest()


def _raw_public(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def sign_evidence(evidence: Mapping, private_key) -> dict:
    """The ``signature`` object: algorithm, the public key (base64 raw), its sha256 fingerprint, the signature (base64)."""
    raw = _raw_public(private_key.public_key())
    return {"algorithm": "Ed25519", "public_key": base64.b64encode(raw).decode(),
            "fingerprint": key_fingerprint(private_key.public_key()),
            "value": base64.b64encode(private_key.sign(canonical_bytes(evidence))).decode()}


def write_evidence_pack(pack_dir: str | Path, evidence: Mapping, *, signing_key: str | Path | None = None,
                        replace: bool = False) -> Path:
    """Write ``evidence.json`` (the evidence and, with a key, its signature) whole into ``pack_dir``.

    Raises
    ------
    InputError
        ``evidence.json`` exists already (and not ``replace``), or the key cannot be read.
    OSError
        The disk refused the write (nothing partial is left: :func:`faux_checks._files.write_whole`).
    """
    from .._files import write_whole

    path = Path(pack_dir) / EVIDENCE_FILE
    if path.exists() and not replace:
        raise InputError(f"{path} exists already (an evidence pack is never overwritten)")
    payload = {"evidence": dict(evidence), "signature": None}
    if signing_key is not None:
        payload["signature"] = sign_evidence(evidence, load_private_key(signing_key))
    write_whole(path, json.dumps(payload, indent=2, allow_nan=False, sort_keys=True))
    return path
