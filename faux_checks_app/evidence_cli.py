"""The evidence-pack commands: ``faux-checks keygen``, ``faux-checks verify`` and the ``check`` command's pack.

The pack itself (hashes, canonical JSON, Ed25519) is :mod:`faux_checks.report.evidence`; the gate flow writes one
per decision (:func:`faux_checks_flows.gate.record`); :mod:`faux_checks.report.verify` checks one. Exit codes of
``verify``: 0 every check holds and the signer is pinned (``--public-key``), or the caller accepted less explicitly
(``--trust-embedded-key``: the key inside the pack; ``--allow-unsigned``: no signature, hashes only); 1 a check failed
(a changed, missing or unlisted file, a decision that is not the report's, a wrong or absent signature) or the signer is
not pinned; 2 unusable input (the pack or the ``--public-key`` file cannot be read). Every string from the pack is
printed with its control characters escaped.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["add_parsers", "cmd_keygen", "cmd_verify", "signing_key_option", "write_check_pack"]


def signing_key_option(p) -> None:
    """The ``--signing-key PEM`` option (check, gate)."""
    p.add_argument("--signing-key", metavar="PEM",
                   help="Ed25519 private key (PEM; `faux-checks keygen`) that signs the decision's evidence.json "
                        "(default: $FAUX_CHECKS_SIGNING_KEY; unsigned without either; an encrypted key reads its "
                        "passphrase from $FAUX_CHECKS_SIGNING_KEY_PASSWORD)")


def add_parsers(sub, parents: dict) -> None:
    """Add ``keygen`` and ``verify`` to the CLI's sub-parsers."""
    p = sub.add_parser("keygen", help="make an Ed25519 key pair for signing evidence packs (PATH and PATH.pub)",
                       **parents)
    p.add_argument("path", help="new private key file (PEM, mode 0600); the public key goes to PATH.pub")
    p.set_defaults(func=cmd_keygen, decides=False)

    p = sub.add_parser("verify", help="re-check an evidence pack: every file's sha256, the decision against its report, "
                                      "the signature; exit 0 when all hold and the signer is pinned, 1 otherwise, "
                                      "2 when the pack or the key cannot be read", **parents)
    p.add_argument("pack", help="evidence.json, or the run folder holding it")
    p.add_argument("--public-key", metavar="PEM", help="the signer's public key as you know it (pins the signer; "
                   "without it the key inside the pack is used: integrity only, exit 1 unless --trust-embedded-key)")
    p.add_argument("--trust-embedded-key", action="store_true",
                   help="accept a pack checked with the key inside it (integrity only: anyone can re-sign an edited "
                        "pack with a new key); exit 0 when every check holds")
    p.add_argument("--file", action="append", metavar="ROLE=PATH", default=[],
                   help="where a file of the pack is now (e.g. model=/models/v3/model.pt2); repeatable")
    p.add_argument("--allow-unsigned", action="store_true",
                   help="accept a pack without signature (hashes only); never with --public-key")
    p.add_argument("--json", action="store_true", help="print the verification as one JSON object on stdout")
    p.set_defaults(func=cmd_verify, decides=False)


def cmd_keygen(args) -> int:
    """Write a new Ed25519 key pair; refuses to overwrite either file."""
    from faux_checks.report.evidence import generate_key

    private, public = generate_key(args.path)
    print(f"private key: {private} (keep it secret; give it to the gate with --signing-key)")
    print(f"public key:  {public} (give it to reviewers: faux-checks verify PACK --public-key {public})")
    return 0


def cmd_verify(args) -> int:
    """Verify an evidence pack: 0 accepted (:meth:`~faux_checks.report.verify.PackVerification.accepted`), 1 not."""
    from faux_checks.errors import InputError
    from faux_checks.report.verify import verify_pack

    from .console import say

    files = {}
    for item in args.file:
        role, sep, path = item.partition("=")
        if not sep or not role or not path:
            raise InputError(f"--file {item!r}: write ROLE=PATH, e.g. --file model=/models/v3/model.pt2")
        files[role] = path
    result = verify_pack(args.pack, public_key=args.public_key, files=files, allow_unsigned=args.allow_unsigned)
    accepted = result.accepted(trust_embedded_key=getattr(args, "trust_embedded_key", False))
    if getattr(args, "json", False):
        print(json.dumps({"pack": result.pack, "ok": result.ok, "outcome": result.outcome, "accepted": accepted,
                          "decision": result.decision, "model": result.model, "signed": result.signed,
                          "pinned": result.pinned, "key_fingerprint": result.key_fingerprint,
                          "checks": [{"item": c.item, "status": c.status, "detail": c.detail} for c in result.checks]}))
    else:
        say(f"evidence pack {result.pack}: decision {result.decision}; model {result.model_identity()}")
        for line in result.lines():
            say(f"  {line}")
        summary = result.summary()
        if result.outcome == "integrity-only" and not accepted:
            summary += " (exit 1; --trust-embedded-key accepts integrity only)"
        say(summary)
    return 0 if accepted else 1


def write_check_pack(report_dir: Path, args) -> Path | None:
    """``evidence.json`` of a ``faux-checks check`` run beside its report (model, data, spec, policy, aux model,
    scores, the linked protected file, report); None when no report was written."""
    from faux_checks.gate.policy import default_policy_path
    from faux_checks.report.evidence import build_evidence, signing_key_path, write_evidence_pack

    report_json = Path(report_dir) / "report.json"
    if not report_json.is_file():
        return None
    files = {"model": args.model, "data": args.data, "spec": args.feature_spec,
             "policy": args.policy or str(default_policy_path()), "aux_model": args.aux_model,
             "report": str(report_json), "report_html": str(Path(report_dir) / "report.html")}
    if args.scores_out and Path(args.scores_out).is_file():
        files["scores"] = args.scores_out
    from .arguments import command_policy

    linked = command_policy(args).protected_file      # the check ran under this policy, so it loads
    if linked is not None and linked.path:
        files["protected_file"] = linked.path          # c's own file, hashed like the audit data
    evidence = build_evidence(report=json.loads(report_json.read_text()), files=files, pack_dir=report_dir,
                              extra={"command": "check"})
    return write_evidence_pack(report_dir, evidence, signing_key=signing_key_path(args.signing_key))
