"""Records are whole or absent.

A full disk under FAUX_CHECKS_HOME never ends with ``report.json`` at 0 bytes, ``gx_validation.json`` cut
mid-way, or a version ``passed`` + ``deployable`` with broken records: every record is written under a temporary
name, synced, read back and renamed; a retry of the gate's ``record`` rewrites; the folder and its upload are
checked before any tag or alias moves.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from _support import FAIR, linear, make_data, write_policy
from faux_checks import _files
from faux_checks._files import IncompleteRecordError, check_records, record_problem, write_whole

REAL_WRITE = _files._write_bytes


def _no_space(path, raw):
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def _truncated(path, raw):
    REAL_WRITE(path, raw[: len(raw) // 2])                   # the writer "succeeds" with half the bytes


def test_a_failed_write_leaves_the_previous_file_or_nothing(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    monkeypatch.setattr(_files, "_write_bytes", _no_space)
    with pytest.raises(OSError, match="No space left on device"):
        write_whole(target, '{"decision": "passed"}')
    assert list(tmp_path.iterdir()) == []                     # no file, no temporary file
    monkeypatch.setattr(_files, "_write_bytes", REAL_WRITE)
    write_whole(target, '{"decision": "failed"}')
    monkeypatch.setattr(_files, "_write_bytes", _truncated)
    with pytest.raises(IncompleteRecordError) as info:
        write_whole(target, '{"decision": "passed", "padding": "' + "x" * 100 + '"}')
    assert str(info.value) == f"{target}: 68 of 137 bytes reached the disk; nothing was kept"
    assert json.loads(target.read_text()) == {"decision": "failed"}   # the earlier whole version, untouched
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_record_problem_reads_each_kind(tmp_path):
    (tmp_path / "a.json").write_text('{"a": [1, 2')
    (tmp_path / "b.html").write_text("<html><body>cut")
    (tmp_path / "c.csv").write_bytes(b"")
    (tmp_path / "d.pt").write_bytes(b"PK\x03\x04 not an archive")
    (tmp_path / "e.html").write_text("<html></html>\n")
    assert record_problem(tmp_path / "a.json").startswith("unreadable (JSONDecodeError: Expecting ")
    assert record_problem(tmp_path / "b.html") == "cut short (no closing </html>)"
    assert record_problem(tmp_path / "c.csv") == "empty (0 bytes)"
    assert record_problem(tmp_path / "d.pt").startswith("unreadable (BadZipFile")
    assert record_problem(tmp_path / "e.html") is None
    assert record_problem(tmp_path / "absent.json") == "missing"
    with pytest.raises(IncompleteRecordError) as info:
        check_records(tmp_path)
    assert str(info.value).startswith(f"records in {tmp_path} are not whole: a.json: unreadable (JSONDecodeError")
    assert "; b.html: cut short (no closing </html>); c.csv: empty (0 bytes); d.pt: unreadable (BadZipFile" in str(info.value)


def test_write_report_rewrites_what_an_interrupted_attempt_left(tmp_path):
    from faux_checks.report.build import write_report
    from faux_checks.report.schema import load_report

    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "report.json").write_bytes(b"")                  # a full disk's leftover: 0 bytes, no report.html
    with pytest.raises(Exception, match="exists already"):
        write_report(folder, decision="undecided", reasons=["x"], check=None)
    write_report(folder, decision="undecided", reasons=["x"], check=None, replace=True)
    assert load_report(folder)["decision"] == "undecided"
    check_records(folder)


# ---------------------------------------------------------------------------- through the gate flow
@pytest.fixture(scope="module")
def env(tmp_path_factory, harness):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    d = tmp_path_factory.mktemp("records-whole")
    make_data(400).to_csv(d / "data.csv", index=False)
    uri = f"sqlite:///{d}/mlflow.db"
    return {"dir": d, "uri": uri, "registry": Registry(uri), "data": d / "data.csv",
            "policy": write_policy(d / "policy.toml"), "fair": save_torchscript(linear(FAIR), d / "fair.pt"),
            "reports": d / "reports"}


def _gate(env, name):
    from faux_checks_flows.gate import gate

    return gate(model_name=name, data_path=str(env["data"]), policy_path=str(env["policy"]),
                tracking_uri=env["uri"], report_root=str(env["reports"]), return_state=True)


def _fail_first(name: str, how):
    """A writer that fails the first write of the record ``name`` (``how``), then writes normally."""
    calls = []

    def write(path, raw):
        if Path(path).name.startswith(f".{name}.") and not calls:
            calls.append(path)
            return how(path, raw)
        return REAL_WRITE(path, raw)
    return write, calls


def _leave_zero_bytes_then_fail(path, raw):
    """What a writer straight to the final name leaves on a full disk: the final name, 0 bytes, and an error."""
    Path(path).with_name(Path(path).name.split(".")[1] + ".json").write_bytes(b"")
    _no_space(path, raw)


def _tags(env, name, version):
    return {r["version"]: r for r in env["registry"].history(name)}[version]


def _assert_records_whole(env, name, version):
    tags = _tags(env, name, version)
    folder = Path(tags["fairness_report"]).parent
    check_records(folder)                                       # every file under it reads whole
    report = json.loads((folder / "report.json").read_text())
    assert report["decision"] == tags["fairness_gate"]
    assert json.loads((folder / "records" / "gx_validation.json").read_text())
    run = tags["fairness_run_id"]
    store = {a.path: a.file_size for a in env["registry"].client.list_artifacts(run)}
    assert store["report.json"] == (folder / "report.json").stat().st_size
    assert store["report.html"] == (folder / "report.html").stat().st_size


@pytest.mark.slow
@pytest.mark.parametrize("record,how", [("gx_validation", _no_space), ("report", _leave_zero_bytes_then_fail),
                                        ("report", _truncated)],
                         ids=["gx-no-space", "report-zero-bytes-left", "report-truncated"])
def test_a_full_disk_on_the_first_attempt_is_rewritten_by_the_retry(env, monkeypatch, record, how):
    name = f"whole-{record}-{how.__name__.strip('_')}"
    version = env["registry"].register_version(name, env["fair"])
    writer, calls = _fail_first(record, how)
    monkeypatch.setattr(_files, "_write_bytes", writer)
    state = _gate(env, name)
    monkeypatch.undo()
    assert len(calls) == 1                                      # the fault happened, once
    assert state.is_completed(), state.message
    tags = _tags(env, name, version)
    assert tags["fairness_gate"] == "passed" and env["registry"].alias_version(name, "deployable") == version
    _assert_records_whole(env, name, version)


@pytest.mark.slow
def test_a_disk_that_stays_full_records_nothing_and_moves_no_alias(env, monkeypatch):
    from faux_checks_flows.gate_record import RECORDS

    name = "whole-never"
    version = env["registry"].register_version(name, env["fair"])

    def report_never_fits(path, raw):
        if Path(path).name.startswith(".report.json."):
            return _truncated(path, raw)
        return REAL_WRITE(path, raw)

    monkeypatch.setattr(_files, "_write_bytes", report_never_fits)
    state = _gate(env, name)
    monkeypatch.undo()
    assert not state.is_completed()
    (outcome,) = getattr(state.data, "result", state.data)
    assert outcome["decision"] == "undecided" and not outcome["promoted"]
    assert outcome["reasons"][0].startswith("the decision 'passed' could not be recorded in the registry "
                                            "(IncompleteRecordError: ")
    assert "bytes reached the disk; nothing was kept" in outcome["reasons"][0]
    tags = _tags(env, name, version)
    assert tags["fairness_gate"] == "running" and env["registry"].new_versions(name) == [version]   # re-gated next run
    assert env["registry"].alias_version(name, "deployable") is None
    (folder,) = [p for p in env["reports"].glob(f"{name}-v{version}-*") if not p.name.endswith("-not-recorded")]
    assert not (folder / "report.json").exists()                 # absent, never half
    assert (folder / "report.html").exists() and not list(folder.rglob("*.tmp"))
    assert json.loads((folder / RECORDS / "gx_validation.json").read_text())
    assert _gate(env, name).is_completed()                       # the disk has room again: the next run records it
    assert _tags(env, name, version)["fairness_gate"] == "passed"
    _assert_records_whole(env, name, version)


def test_an_upload_that_differs_from_the_files_is_refused(env, tmp_path):
    reg = env["registry"]
    name = "whole-upload"
    version = reg.register_version(name, env["fair"])
    folder = tmp_path / "rep"
    (folder / "records").mkdir(parents=True)
    (folder / "report.json").write_text('{"a": 1}')
    (folder / "records" / "by_group.csv").write_text("group,n\nF,10\n")
    run_id = reg.log_gate_run(name, version, report_dir=folder, metrics={}, params={}, tags={})
    reg._check_uploaded(run_id, folder)                           # identical: nothing raised
    (folder / "records" / "by_group.csv").write_text("group,n\nF,10\nM,12\n")
    (folder / "extra.json").write_text("{}")
    with pytest.raises(IncompleteRecordError) as info:
        reg._check_uploaded(run_id, folder)
    assert str(info.value) == (f"run {run_id}: the artifact store does not hold 2 of the 3 record files whole: "
                               "extra.json (absent, 2 written); records/by_group.csv (13 bytes, 18 written)")


def _half_then_no_space(path, raw):
    """The disk fills mid-write: half the bytes reach the temporary file, then ``ENOSPC``."""
    with open(path, "xb") as fh:
        fh.write(raw[: len(raw) // 2])
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


@pytest.mark.slow
def test_a_full_disk_through_the_cli_exits_2_leaves_no_partial_file_and_the_next_gate_decides(env, monkeypatch):
    """A full disk end to end: ``faux-checks gate`` with every record write dying on ENOSPC mid-write.

    Never exit 0 with the version ``passed`` + ``deployable`` and a 0-byte report.json: exit 2, the version
    stays new (``running``), no alias, no file under the report root that does not read whole and no temporary
    file; with the disk back, the next gate records ``passed`` whole.
    """
    from faux_checks_app.cli import main

    name = "whole-cli-enospc"
    version = env["registry"].register_version(name, env["fair"])
    reports = env["dir"] / "reports-cli"
    failed = []

    def full_disk(path, raw):
        failed.append(path)
        return _half_then_no_space(path, raw)

    monkeypatch.setattr(_files, "_write_bytes", full_disk)
    argv = ["gate", name, "--data", str(env["data"]), "--policy", str(env["policy"]), "--tracking-uri", env["uri"],
            "--report-dir", str(reports)]
    code = main(argv)
    monkeypatch.undo()
    assert failed and code == 2
    tags = _tags(env, name, version)
    assert tags["fairness_gate"] == "running" and env["registry"].new_versions(name) == [version]
    assert env["registry"].alias_version(name, "deployable") is None
    assert not list(reports.rglob("*.tmp"))
    for folder in [p for p in reports.iterdir() if p.is_dir()]:
        check_records(folder)                                   # what is there reads whole
        assert not (folder / "report.json").exists()            # the decision's record is absent, never half
    assert main(argv) == 0                                      # the disk has room again
    assert _tags(env, name, version)["fairness_gate"] == "passed"
    assert env["registry"].alias_version(name, "deployable") == version
    _assert_records_whole(env, name, version)
