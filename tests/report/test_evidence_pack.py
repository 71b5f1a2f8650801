"""What `faux-checks verify` may claim about an evidence pack, on the signed pack of a real `faux-checks check` run.

The pack is the one the check's own code writes (``build_evidence`` / ``write_evidence_pack`` through
``check --report-dir --signing-key``) for the unfair linear model of ``_support`` (decision ``failed``, exit 1),
over a model file whose name holds terminal escape sequences. Each test copies the run folder and forges it as a
forger or a careless operator would: a stripped signature, an edited decision re-signed with another key, a file
added beside the pack, a key added outside the signed object, a missing key file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import _support
from _support import UNFAIR
from faux_checks.inputs.models import save_torchscript
from faux_checks.report.evidence import (file_sha256, generate_key, key_fingerprint, load_private_key,
                                         load_public_key, sign_evidence)
from faux_checks_app.cli import main

#: A model file name that, printed raw, erases the line (ESC[2K), returns to its start (CR) and hides what follows
#: (ESC[8m): a failed row would read as something else on a terminal.
HOSTILE_NAME = "m\x1b[2K\r\x1b[8m.pt"


@pytest.fixture(scope="module")
def signed_run(tmp_path_factory):
    """A real signed pack: ``check`` of the unfair model on 600 rows, with its keys."""
    d = tmp_path_factory.mktemp("pack")
    _support.make_data(600, 0).to_csv(d / "data.csv", index=False)
    model = save_torchscript(_support.linear(UNFAIR), d / HOSTILE_NAME)
    (d / "policy.toml").write_text('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n'
                                   '[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n[aux]\nepochs = 4\n'
                                   '[decision]\nmin_group_rows = 20\n')
    assert main(["keygen", str(d / "signer.pem")]) == 0
    assert main(["keygen", str(d / "forger.pem")]) == 0
    code = main(["check", "--model", str(model), "--data", str(d / "data.csv"), "--policy", str(d / "policy.toml"),
                 "--report-dir", str(d / "run"), "--signing-key", str(d / "signer.pem"), "-q"])
    assert code == 1
    return {"dir": d, "run": d / "run", "model": model, "pub": str(d / "signer.pem.pub"),
            "forger": d / "forger.pem", "forger_pub": str(d / "forger.pem.pub")}


@pytest.fixture()
def pack(signed_run, tmp_path):
    """A copy of the run folder (the model file stays where the check read it)."""
    run = tmp_path / "run"
    shutil.copytree(signed_run["run"], run)
    return run


def _payload(run: Path) -> dict:
    return json.loads((run / "evidence.json").read_text())


def _write(run: Path, payload: dict) -> None:
    (run / "evidence.json").write_text(json.dumps(payload, indent=2))


def _verify(capsys, *argv) -> tuple[int, str, str]:
    code = main(["verify", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_real_pack_verifies_with_the_pinned_key_and_names_the_model(signed_run, pack, capsys):
    code, out, _ = _verify(capsys, pack, "--public-key", signed_run["pub"])
    assert code == 0, out
    model = _payload(pack)["evidence"]["model"]
    assert model["sha256"] == file_sha256(signed_run["model"])
    header, last = out.splitlines()[0], out.splitlines()[-1]
    assert header.endswith(f"decision failed; model m\\x1b[2K\\r\\x1b[8m.pt sha256 {model['sha256'][:16]}…")
    assert "ok  decision: failed, exit code 1 and" in out
    assert "checked at its recorded path only: pass --file model=PATH to check the file you deploy" in out
    assert last.startswith("verified: every file matches, the decision is the report's, and the pinned key "
                           f"{key_fingerprint(load_public_key(signed_run['pub']))[:16]}…")
    copy = pack.parent / "model_copy.pt"                              # the reviewer's copy: no such note
    shutil.copy(signed_run["model"], copy)
    code, out, _ = _verify(capsys, pack, "--public-key", signed_run["pub"], "--file", f"model={copy}")
    assert code == 0 and "recorded path only" not in out


def test_a_pinned_signer_is_never_optional(signed_run, pack, capsys):
    """A stripped signature and a decision edited to passed: --allow-unsigned --public-key K -> exit 1."""
    honest_unsigned = _payload(pack)
    honest_unsigned["signature"] = None
    _write(pack, honest_unsigned)
    code, out, _ = _verify(capsys, pack, "--allow-unsigned", "--public-key", signed_run["pub"])
    assert code == 1
    assert "failed  signature: the pack is not signed, but --public-key pins a signer" in out
    assert out.splitlines()[-1] == "NOT verified: 1 of 7 checks did not hold"
    code, out, _ = _verify(capsys, pack, "--allow-unsigned")           # hashes only, said as such
    assert code == 0 and out.splitlines()[-1] == "hashes match; the pack is NOT signed (anyone could have written it)"
    assert "verified" not in out.replace("NOT verified", "")
    forged = dict(honest_unsigned, evidence={**honest_unsigned["evidence"], "decision": "passed", "exit_code": 0})
    _write(pack, forged)
    for extra in (["--public-key", signed_run["pub"]], []):
        code, out, _ = _verify(capsys, pack, "--allow-unsigned", *extra)
        assert code == 1 and out.splitlines()[-1].startswith("NOT verified")
        assert ("failed  decision: the pack's decision, exit_code differ from the report it hashes "
                f"({pack / 'report.json'}): the pack says 'passed' (exit code 0), the report 'failed' (exit code 1)"
                in out)


def test_an_unpinned_pack_is_integrity_only_and_exits_1_unless_trusted(signed_run, pack, capsys):
    code, out, _ = _verify(capsys, pack)
    fp = key_fingerprint(load_public_key(signed_run["pub"]))
    assert code == 1
    assert out.splitlines()[-1] == (f"integrity only, signer NOT pinned: every file matches what the pack signs, but it "
                                    f"was checked with the key inside the pack ({fp[:16]}…); anyone can re-sign an "
                                    "edited pack. Pin the signer with --public-key PEM (exit 1; --trust-embedded-key "
                                    "accepts integrity only)")
    code, out, _ = _verify(capsys, pack, "--trust-embedded-key")
    assert code == 0 and out.splitlines()[-1].startswith("integrity only, signer NOT pinned")
    code, out, _ = _verify(capsys, pack, "--json")
    result = json.loads(out)
    assert (code, result["outcome"], result["accepted"], result["key_fingerprint"]) == (1, "integrity-only", False, fp)


def test_a_decision_edited_and_re_signed_with_another_key_is_refused(signed_run, pack, capsys):
    payload = _payload(pack)
    evidence = {**payload["evidence"], "decision": "passed", "exit_code": 0, "rule": None}
    payload.update(evidence=evidence, signature=sign_evidence(evidence, load_private_key(signed_run["forger"])))
    _write(pack, payload)
    code, out, _ = _verify(capsys, pack, "--trust-embedded-key")        # the signature holds; the report says failed
    assert code == 1 and "failed  decision: the pack's decision, exit_code, rule differ from the report" in out
    # the forger edits report.json too and re-hashes it: pinned, the signer is named by both fingerprints
    report = json.loads((pack / "report.json").read_text())
    report.update(decision="passed", exit_code=0, rule=None)
    (pack / "report.json").write_text(json.dumps(report))
    evidence["files"]["report"].update(sha256=file_sha256(pack / "report.json"),
                                       bytes=(pack / "report.json").stat().st_size)
    signature = sign_evidence(evidence, load_private_key(signed_run["forger"]))
    pinned = key_fingerprint(load_public_key(signed_run["pub"]))
    actual = key_fingerprint(load_public_key(signed_run["forger_pub"]))
    signature["fingerprint"] = pinned                                   # the pack's own claim lies
    payload.update(evidence=evidence, signature=signature)
    _write(pack, payload)
    code, out, _ = _verify(capsys, pack, "--public-key", signed_run["pub"])
    assert code == 1
    assert f"failed  signature: signed by key {actual} (the key in the pack), not by the pinned key {pinned}" in out
    code, out, _ = _verify(capsys, pack, "--trust-embedded-key")        # unpinned: its fingerprint claim is checked
    assert code == 1 and f"the pack's fingerprint field '{pinned}' is not that of its key ({actual})" in out


def test_an_unlisted_file_and_an_unsigned_key_fail(signed_run, pack, capsys):
    (pack / "records").mkdir(exist_ok=True)
    (pack / "records" / "approval.txt").write_text("approved: passed\n")
    payload = _payload(pack)
    payload["reviewer_note"] = {"decision": "passed"}
    payload["signature"]["comment"] = "approved"
    _write(pack, payload)
    code, out, _ = _verify(capsys, pack, "--public-key", signed_run["pub"])
    assert code == 1
    assert ("failed  unlisted file: records/approval.txt is in the pack's folder but not in the signed evidence" in out)
    assert "failed  envelope: evidence.json holds keys outside the signed evidence: ['reviewer_note']" in out
    assert "failed  envelope: the signature block holds unknown keys ['comment']" in out
    assert out.splitlines()[-1] == "NOT verified: 3 of 10 checks did not hold"


def test_a_missing_or_unreadable_public_key_is_unusable_input(signed_run, pack, capsys):
    missing = pack.parent / "nokey.pem.pub"
    code, out, err = _verify(capsys, pack, "--public-key", missing)
    assert (code, out) == (2, "")
    assert f"public key '{missing}': no such file" in err
    code, _, err = _verify(capsys, pack, "--public-key", pack)           # a folder: cannot be read
    assert code == 2 and f"public key {pack}: cannot be read" in err


def test_strings_from_the_pack_are_printed_escaped(signed_run, pack):
    """On the printed bytes: no ESC, CR or bidi control from the recorded model path or a forged detail reaches
    the terminal; the failed row and the verdict stay readable."""
    (pack / "report.html").write_text("changed")                       # a failed row beside the model's
    payload = _payload(pack)
    payload["evidence"]["decision"] = "failed\x1b[2K\r\u202epassed"      # an edited, hostile decision string
    _write(pack, payload)
    env = {**os.environ, "DO_NOT_TRACK": "true"}
    proc = subprocess.run([sys.executable, "-m", "faux_checks_app.cli", "verify", str(pack), "--public-key",
                           signed_run["pub"]], capture_output=True, timeout=900, env=env)
    out = proc.stdout
    assert proc.returncode == 1, proc.stderr[-2000:]
    for raw in (b"\x1b", b"\r", "\u202e".encode()):
        assert raw not in out
    assert b"m\\x1b[2K\\r\\x1b[8m.pt" in out                          # the model path, escaped
    assert b"decision failed\\x1b[2K\\r\\u202epassed;" in out
    assert b"failed  report_html:" in out
    assert out.splitlines()[-1].startswith(b"NOT verified:")


def test_keygen_modes_do_not_depend_on_the_umask(tmp_path):
    previous = os.umask(0)
    try:
        private, public = generate_key(tmp_path / "k.pem")
    finally:
        os.umask(previous)
    assert (private.stat().st_mode & 0o777, public.stat().st_mode & 0o777) == (0o600, 0o644)
