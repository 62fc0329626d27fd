"""``gridstream sql purge-tombstones``: forgets old tombstones, keeps the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridstream.cli import main
from gridstream.operations import OpType
from gridstream.protocol import Envelope
from gridstream.stores.sql import SqlStore, SqlStoreConfig


def _env(op: OpType, version: int, entity: str) -> Envelope:
    data = None if op.is_delete else {"id": entity}
    return Envelope(op=op, type="shop.Order", id=entity, version=version, ts=version,
                    partition=0, data=data)


def test_purge_tombstones_below_a_version(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with SqlStore(url) as store:
        store.apply([_env(OpType.WRITE, 1, "a"), _env(OpType.REMOVE, 2, "a"),
                     _env(OpType.WRITE, 3, "b"), _env(OpType.TAKE, 4, "b"),
                     _env(OpType.WRITE, 5, "c")])
    assert main(["sql", "purge-tombstones", "--url", url, "--type", "shop.Order",
                 "--below-version", "4"]) == 0
    assert "purged 1 tombstones of shop.Order below version 4 (table shop_Order" in \
        capsys.readouterr().out
    with SqlStore(url) as store:
        rows = {r.id: r.deleted for r in store.read("shop.Order", include_deleted=True)}
    assert rows == {"b": True, "c": False}


def test_purge_needs_a_url(monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GRIDSTREAM_SQL_URL", raising=False)
    assert main(["sql", "purge-tombstones", "--type", "T", "--below-version", "1"]) == 2
    assert "GRIDSTREAM_SQL_URL" in capsys.readouterr().err


def test_purge_takes_the_url_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with SqlStore(url) as store:
        store.apply([_env(OpType.WRITE, 1, "a"), _env(OpType.REMOVE, 2, "a")])
    monkeypatch.setenv("GRIDSTREAM_SQL_URL", url)
    assert main(["sql", "purge-tombstones", "--type", "shop.Order",
                 "--below-version", "10"]) == 0
    assert "purged 1 tombstones" in capsys.readouterr().out


def test_purge_with_the_store_s_table_prefix(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with SqlStore(SqlStoreConfig(url=url, table_prefix="p_")) as store:
        store.apply([_env(OpType.WRITE, 1, "a"), _env(OpType.REMOVE, 2, "a")])
    assert main(["sql", "purge-tombstones", "--url", url, "--type", "shop.Order",
                 "--below-version", "10"]) == 0
    assert "purged 0 tombstones" in capsys.readouterr().out  # not this prefix's table
    assert main(["sql", "purge-tombstones", "--url", url, "--type", "shop.Order",
                 "--below-version", "10", "--table-prefix", "p_"]) == 0
    assert "purged 1 tombstones of shop.Order below version 10 (table p_shop_Order" in \
        capsys.readouterr().out


def test_a_bad_url_is_a_config_error_without_the_password(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sql", "purge-tombstones", "--url", "mysql://app:s3cret@127.0.0.1/db",
                 "--type", "T", "--below-version", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "sqlite:/// or postgresql://" in err and "s3cret" not in err
