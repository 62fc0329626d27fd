"""The ``gridstream`` command line: stack, demo, mirror, consume, run (pipelines and
connectors), status (of a run), sql."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence

from gridstream.errors import GridstreamError, NotInstalledError

__all__ = ["main"]


def _services_arg(raw: str | None) -> list[str] | None:
    if raw is None:
        return None
    return [s.strip() for s in raw.split(",") if s.strip()]


def _stack(args: argparse.Namespace) -> int:
    from gridstream import stack

    if args.members is not None:  # the cluster size is read where the services are built
        os.environ["GRIDSTREAM_HAZELCAST_MEMBERS"] = str(args.members)
    chosen = stack.services(_services_arg(args.services))
    if args.action == "up":
        for svc in chosen:
            started = time.monotonic()
            status = svc.up()
            print(f"{status.line()}  ({time.monotonic() - started:.1f}s)", flush=True)
    elif args.action == "down":
        for svc in reversed(chosen):
            print(svc.down().line(), flush=True)
    elif args.action == "fetch":
        for name in stack.ARTIFACT_SETS:
            print(f"{name:<10}{stack.ensure_artifacts(name)}", flush=True)
        _spark_class_data()
    else:
        statuses = [svc.status() for svc in chosen]
        for status in statuses:
            print(status.line())
        if any(s.state != "up" for s in statuses):
            return 3
    return 0


def _spark_class_data() -> None:
    """The Spark driver's class-data archive, built once (without PySpark: nothing). A
    failed build is a warning: drivers then start without it, slower, nothing else."""
    from gridstream.spark import class_data

    started = time.monotonic()
    try:
        if not class_data.archive(class_data.driver_jars()).is_file():
            print("building the Spark driver's class-data archive (once, about a "
                  "minute) ...", file=sys.stderr, flush=True)
        built = class_data.build()
    except NotInstalledError:
        return
    except GridstreamError as exc:
        first, *rest = str(exc).splitlines() or [type(exc).__name__]
        print(f"warning: {first.rstrip(':')}; Spark drivers start without it (slower, "
              "nothing else)",
              *(f"  {line}" for line in rest), sep="\n", file=sys.stderr, flush=True)
        return
    print(f"{'classes':<10}{built}  ({time.monotonic() - started:.1f}s)", flush=True)


def _demo(args: argparse.Namespace) -> int:
    from gridstream.demo import run_demo

    return run_demo(keep_stack=args.keep_stack, operations=args.operations)


def _run(args: argparse.Namespace) -> int:
    from gridstream.run.config import run_config

    return run_config(args.config)


def _status(args: argparse.Namespace) -> int:
    from gridstream.ops.cli import DEFAULT_URL, show_status

    return show_status(args.url or DEFAULT_URL, as_json=args.json)


def _sql(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from gridstream.errors import ConfigError
    from gridstream.stores.sql import SqlStore, SqlStoreConfig

    url = args.url or os.environ.get("GRIDSTREAM_SQL_URL")
    if not url:
        raise ConfigError("give the database as --url or in GRIDSTREAM_SQL_URL")
    try:
        config = SqlStoreConfig.model_validate({"url": url, "table_prefix": args.table_prefix})
    except ValidationError as exc:
        raise ConfigError(f"invalid SQL store: {exc}") from None
    with SqlStore(config) as store:
        purged = store.purge_tombstones(args.type, args.below_version)
        print(f"purged {purged} tombstones of {args.type} below version {args.below_version} "
              f"(table {store.table_name(args.type)}, {store.describe()})")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gridstream",
        description="Connect a data grid with Kafka and stores; pipelines on Spark.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    st = sub.add_parser("stack", help="start/stop/check the local services on loopback")
    st.add_argument("action", choices=["up", "down", "status", "fetch"])
    st.add_argument("--services", help="comma-separated: kafka,cassandra,postgres,hazelcast,"
                    "registry (default: kafka,cassandra and any other running)")
    st.add_argument("--members", type=int, help="hazelcast: members in the local cluster "
                    "(GRIDSTREAM_HAZELCAST_MEMBERS, default 1)")
    st.set_defaults(func=_stack)

    demo = sub.add_parser("demo", help="the quickstart, end to end, on embedded defaults")
    demo.add_argument("--operations", type=int, default=2000, help="workload size")
    demo.add_argument("--keep-stack", action="store_true", help="leave services running")
    demo.set_defaults(func=_demo)

    # parsed by their own modules (see _pass_through); listed here for --help
    sub.add_parser("mirror", help="mirror a space's operation log to Kafka (--help for options)")
    sub.add_parser("consume", help="print decoded operations of topics (--help for options)")

    run = sub.add_parser("run", help="run the pipelines and connectors of a FILE.toml, or the "
                                     "connector of a CONNECTOR.properties, until stopped")
    run.add_argument("config", help="a .toml run file or a connector's .properties file")
    run.set_defaults(func=_run)

    status = sub.add_parser("status", help="the flows of a running `gridstream run`: state, "
                            "counts, lag; exit 1 when one failed, 3 when none answers")
    status.add_argument("--url", default=None, help="the run's status URL (printed when it "
                        "starts; default http://127.0.0.1:8094)")
    status.add_argument("--json", action="store_true", help="print the JSON status")
    status.set_defaults(func=_status)

    sql = sub.add_parser("sql", help="maintain a SQL store (the SQL consumer's or sink's)")
    sql_sub = sql.add_subparsers(dest="sql_command", required=True)
    purge = sql_sub.add_parser(
        "purge-tombstones",
        help="delete the tombstones of a type below a version (once replays of older "
             "operations can no longer arrive)")
    purge.add_argument("--url", help="sqlite:///file.db or postgresql://... "
                                     "(default: $GRIDSTREAM_SQL_URL)")
    purge.add_argument("--type", required=True, help="the type name (e.g. shop.Order)")
    purge.add_argument("--below-version", type=int, required=True,
                       help="purge tombstones whose version is lower than this")
    purge.add_argument("--table-prefix", default="",
                       help="the table prefix the store was written with (default: none)")
    purge.set_defaults(func=_sql)
    return parser


def _pass_through(command: str, rest: list[str]) -> int:
    """``mirror`` and ``consume`` own their options; hand them everything after the name."""
    if command == "mirror":
        from gridstream.mirror.__main__ import main as mirror_main

        return mirror_main(rest)
    from gridstream.consumer import main as consume_main

    return consume_main(rest)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("mirror", "consume"):
        try:
            return _pass_through(argv[0], argv[1:])
        except GridstreamError as exc:
            print(f"gridstream: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except GridstreamError as exc:
        print(f"gridstream: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gridstream: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
