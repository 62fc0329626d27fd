"""Consume mirrored operations and store them in a SQL database, idempotently.

    python examples/sql_consumer.py --topic orders --db sqlite:///orders.db \
        [--data-dir SPACE_DIR] [--bootstrap 127.0.0.1:9092] [--idle-timeout 10]

One table per type (``id, version, deleted, op, ts, data``: the entity as wire JSON);
rows are upserted by id only when the version is newer; deletes keep a tombstone;
offsets are committed after the database commit. ``--data-dir`` names the space, whose
types tell which properties are declared (an unset one is kept as null).
PostgreSQL works too: ``--db postgresql://user@host/db`` (pip install 'gridstream[postgres]').
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Mapping
from typing import Any

from gridstream.consumer import OperationConsumer
from gridstream.operations import TypeDescriptor
from gridstream.stores.sql import SqlStore, run_sql_consumer


def _types(data_dir: str | None) -> Mapping[str, TypeDescriptor]:
    if data_dir is None:
        return {}
    from gridstream.space import open_log_reader

    reader = open_log_reader(data_dir)
    try:
        return dict(reader.types())
    finally:
        reader.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", action="append", required=True)
    parser.add_argument("--group", default="gridstream-sql-consumer")
    parser.add_argument("--db", default="sqlite:///gridstream.db")
    parser.add_argument("--data-dir", help="the space's data directory (for its types)")
    parser.add_argument("--skip-undecodable", action="store_true")
    parser.add_argument("--idle-timeout", type=float, default=None,
                        help="stop after this many idle seconds (default: run until Ctrl-C)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    types = _types(args.data_dir)
    consumer = OperationConsumer(args.bootstrap, topics=args.topic, group_id=args.group,
                                 types=types,
                                 on_decode_error="skip" if args.skip_undecodable else "fail")
    store = SqlStore(args.db, types=types)
    stop = threading.Event()

    def on_signal(*_: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        with consumer:
            applied = run_sql_consumer(consumer, store, idle_timeout_s=args.idle_timeout,
                                       stop=stop)
    finally:
        store.close()
    print(f"applied {applied} operations; skipped {consumer.skipped} undecodable records")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
