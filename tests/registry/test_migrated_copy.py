"""The suite's sqlite registries from one migrated copy (tests/_support.copy_migrated_schema) equal migrated ones.

Each registry is opened through :class:`faux_checks.registry.Registry` on a new file: one with MLflow's own
``_initialize_tables`` (create_all and every alembic migration), one with the copy of a template that function
migrated. Their schema (every table, index and trigger with the lines of its SQL), alembic revision and rows must be the same,
the Default experiment included with each registry's own artifact root (not the template's).
"""

from __future__ import annotations

import os
import sqlite3

import pytest

from _support import copy_migrated_schema


def _lines(sql: str | None) -> list[str]:
    """A CREATE statement as its sorted lines without their commas: MLflow's migrations write a table's CHECK
    constraints in an order that differs from one migration to the next (even within one process)."""
    return sorted(line.strip().rstrip(",").strip() for line in (sql or "").splitlines())


def _contents(path) -> dict:
    with sqlite3.connect(path) as conn:
        schema = sorted(((kind, name, table, _lines(sql)) for kind, name, table, sql in
                         conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")), key=str)
        tables = [name for kind, name, _, _ in schema if kind == "table" and not name.startswith("sqlite_")]
        rows = {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=str) for t in tables}
    return {"schema": schema, "rows": rows}


def _open(path, initialize, monkeypatch) -> None:
    import mlflow.store.db.utils as utils
    import mlflow.store.model_registry.sqlalchemy_store as registry_store

    from faux_checks.registry import Registry

    monkeypatch.setattr(utils, "_initialize_tables", initialize)
    monkeypatch.setattr(registry_store, "_initialize_tables", initialize)
    Registry(f"sqlite:///{path}").client.search_registered_models()
    monkeypatch.undo()


def test_a_registry_from_the_migrated_copy_has_the_schema_and_rows_of_a_migrated_one(tmp_path, monkeypatch):
    import mlflow.store.db.utils as utils

    migrate = getattr(utils._initialize_tables, "migrated_from", utils._initialize_tables)   # MLflow's own
    calls = []

    def counted(engine):
        calls.append(str(engine.url))
        return migrate(engine)

    _open(tmp_path / "migrated.db", migrate, monkeypatch)
    copied = copy_migrated_schema(counted, str(tmp_path / "template.db"))
    _open(tmp_path / "copied-1.db", copied, monkeypatch)
    _open(tmp_path / "copied-2.db", copied, monkeypatch)
    assert calls == [f"sqlite:///{tmp_path / 'template.db'}.{os.getpid()}.tmp"]   # migrated once

    migrated = _contents(tmp_path / "migrated.db")
    assert len(migrated["schema"]) > 30 and migrated["rows"]["alembic_version"]
    for name in ("copied-1.db", "copied-2.db"):
        copy = _contents(tmp_path / name)
        assert copy["schema"] == migrated["schema"]
        assert copy["rows"]["alembic_version"] == migrated["rows"]["alembic_version"]
        assert {t for t, rows in copy["rows"].items() if rows} == {t for t, rows in migrated["rows"].items() if rows}
        (default,) = copy["rows"]["experiments"]
        (reference,) = migrated["rows"]["experiments"]
        assert default[:2] == reference[:2] == (0, "Default")
        assert "template" not in str(default)      # the artifact root is the registry's, not the template's
        assert [r for r in default if isinstance(r, str)] == [r for r in reference if isinstance(r, str)]


class _Engine:
    """Only the URL: a database other than a sqlite file is handed on before anything is read from it."""

    def __init__(self, uri: str) -> None:
        import sqlalchemy

        self.url = sqlalchemy.engine.make_url(uri)


@pytest.mark.parametrize("uri", ["sqlite:///:memory:", "sqlite://", "postgresql://u@h/db"])
def test_other_databases_go_through_mlflows_own_initialisation(uri, tmp_path):
    calls = []
    copied = copy_migrated_schema(calls.append, str(tmp_path / "template.db"))
    engine = _Engine(uri)
    copied(engine)
    assert calls == [engine] and not (tmp_path / "template.db").exists()


def test_a_file_with_tables_goes_through_mlflows_own_initialisation(tmp_path):
    import sqlalchemy

    with sqlite3.connect(tmp_path / "half.db") as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'half.db'}")
    calls = []
    copy_migrated_schema(calls.append, str(tmp_path / "template.db"))(engine)
    assert calls == [engine] and not (tmp_path / "template.db").exists()
