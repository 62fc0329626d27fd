"""The stack's PostgreSQL as tests and users meet it: loopback only, an unprivileged
owner, no password on command lines or in logs, and the per-test SQL URLs."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import sqlalchemy as sa

from gridstream.stack.postgres import DATABASE, PostgresService


def test_serves_the_gridstream_database_on_loopback_only(
    postgres_service: PostgresService,
) -> None:
    import psycopg

    with psycopg.connect(postgres_service.url()) as conn:
        row = conn.execute(
            "SELECT current_database(), current_setting('listen_addresses'), "
            "inet_server_addr()::text"
        ).fetchone()
    assert row == (DATABASE, "127.0.0.1", "127.0.0.1/32")


def test_runs_unprivileged_and_keeps_the_password_secret(
    postgres_service: PostgresService,
) -> None:
    status = postgres_service.status()
    assert status.state == "up" and status.pid is not None
    proc = Path(f"/proc/{status.pid}")
    owner = proc.stat().st_uid
    assert owner != 0
    data = Path(postgres_service.server_link.resolve() / "data")
    assert data.stat().st_uid == owner and (data.stat().st_mode & 0o077) == 0
    if os.geteuid() == 0:
        assert pwd.getpwuid(owner).pw_name == os.environ.get(
            "GRIDSTREAM_POSTGRES_OS_USER", "gridstream"
        )
    password = postgres_service.passfile.read_text().strip().rsplit(":", 1)[-1]
    assert len(password) >= 24
    assert password.encode() not in (proc / "cmdline").read_bytes()
    assert password.encode() not in postgres_service.log_file.read_bytes()
    assert password not in status.line()


def test_sql_url_is_a_fresh_empty_database(sql_url: str) -> None:
    engine = sa.create_engine(sql_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            assert sa.inspect(conn).get_table_names() == []
            conn.execute(sa.text("CREATE TABLE t (id integer PRIMARY KEY)"))
            conn.execute(sa.text("INSERT INTO t VALUES (1)"))
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT id FROM t")).scalar_one() == 1
    finally:
        engine.dispose()
