"""A PostgreSQL server (Debian's binaries) on loopback, with a ``gridstream`` database.

The server listens on 127.0.0.1 only, its unix socket in a directory of its own. It
refuses to run as root, so a root caller runs it as an unprivileged system user
(``gridstream``, created when missing, ``GRIDSTREAM_POSTGRES_OS_USER`` to choose another)
that owns the server's files. Those files (``data``, the cluster; ``run``, the socket) live
in ``$GRIDSTREAM_HOME/services/postgres/server``; when that user cannot reach the stack
home (``/root`` is private), they live in ``/var/lib/gridstream/postgres-<hash of the
service directory>`` and ``server`` is a symbolic link to it.

Clients authenticate with a password (SCRAM) generated at the first start. It is kept in
``$GRIDSTREAM_HOME/services/postgres/pgpass`` (mode 0600, libpq's password-file format)
and never appears on a command line, in a log or in the URL: the URL names the file
(``passfile=``), which libpq, psycopg and SQLAlchemy read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

from gridstream._optional import require
from gridstream.errors import StackError
from gridstream.stack import _process
from gridstream.stack.service import LOOPBACK, LocalService

__all__ = ["DATABASE", "PostgresService", "find_bin_dir"]

DATABASE = "gridstream"
"""The database created for gridstream."""
ROLE = "gridstream"
"""The server's superuser that clients log in as."""
_DEBIAN_ROOT = Path("/usr/lib/postgresql")
_RELOCATED_ROOT = Path("/var/lib/gridstream")


def find_bin_dir(root: Path = _DEBIAN_ROOT) -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb`` and ``postgres``
    (``GRIDSTREAM_POSTGRES_BIN`` names another directory)."""
    configured = os.environ.get("GRIDSTREAM_POSTGRES_BIN")
    candidates = [Path(configured)] if configured else sorted(
        (p / "bin" for p in root.glob("*") if p.name.replace(".", "").isdigit()),
        key=lambda p: tuple(int(x) for x in p.parent.name.split(".")),
        reverse=True,
    )
    for bin_dir in candidates:
        if all(os.access(bin_dir / exe, os.X_OK) for exe in ("initdb", "postgres")):
            return bin_dir
    where = configured or f"{root}/<version>/bin"
    raise StackError(
        f"PostgreSQL not found: no initdb and postgres in {where}; "
        "install Debian's postgresql package (apt-get install postgresql)"
    )


def _psycopg() -> ModuleType:
    """psycopg, or the install command when it is missing."""
    return require("psycopg", "the postgres service")


def _service_user(name: str) -> _process.RunAs:
    """The system user ``name``, created when missing (the caller is root)."""
    entry = _user_entry(name)
    if entry is None:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise StackError(f"cannot create the system user {name!r}: no useradd")
        done = subprocess.run(  # noqa: S603 - fixed arguments, no shell
            [useradd, "--system", "--user-group", "--no-create-home",
             "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
            capture_output=True, text=True, check=False,
        )
        entry = _user_entry(name)
        if entry is None:
            raise StackError(f"cannot create the system user {name!r}: {done.stderr.strip()}")
    return _process.RunAs(name, entry.pw_uid, entry.pw_gid)


def _user_entry(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _reachable(path: Path, user: _process.RunAs) -> bool:
    """True when ``user`` may traverse every directory down to ``path`` (mode bits)."""
    for directory in [*reversed(path.parents), path]:
        try:
            info = directory.stat()
        except FileNotFoundError:
            return True  # created later by the caller, inside reachable parents
        if info.st_uid == user.uid:
            bit = stat.S_IXUSR
        elif info.st_gid == user.gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return False
    return True


class PostgresService(LocalService):
    name = "postgres"
    start_timeout_s = 60.0
    stop_signal = signal.SIGINT
    """Fast shutdown: open sessions are ended, not waited for."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.port = int(os.environ.get("GRIDSTREAM_POSTGRES_PORT", "15432"))
        self.passfile = self.dir / "pgpass"
        self.server_link = self.dir / "server"
        self._user_name = os.environ.get("GRIDSTREAM_POSTGRES_OS_USER", "gridstream")

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def marker(self) -> str:
        return "--cluster-name=gridstream-postgres"

    def ports(self) -> list[int]:
        return [self.port]

    def database_url(self, database: str = DATABASE) -> str:
        """A libpq URL of ``database`` (no password: it names the password file)."""
        return (
            f"postgresql://{ROLE}@{LOOPBACK}:{self.port}/{quote(database, safe='')}"
            f"?passfile={quote(str(self.passfile), safe='/')}"
        )

    def url(self) -> str:
        """The URL of the ``gridstream`` database."""
        return self.database_url()

    def run_as(self) -> _process.RunAs | None:
        return _service_user(self._user_name) if os.geteuid() == 0 else None

    @property
    def _server(self) -> Path:
        """The server's own directory (the target of ``server`` when relocated)."""
        return self.server_link.resolve() if self.server_link.is_symlink() else self.server_link

    def workdir(self) -> Path:
        return self._server

    def argv(self) -> list[str]:
        server = self._server
        return [
            str(find_bin_dir() / "postgres"), "-D", str(server / "data"),
            self.marker, "-p", str(self.port),
            "-c", f"listen_addresses={LOOPBACK}",
            "-c", f"unix_socket_directories={server / 'run'}",
            "-c", "shared_buffers=64MB", "-c", "max_connections=100",
        ]

    def prepare(self) -> None:
        _psycopg()  # the health check needs it: fail before creating anything
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        user = self.run_as()
        if not self.server_link.exists():
            self._make_server_dir(user)
        server = self._server
        if not (server / "data" / "PG_VERSION").exists():
            self._initdb(server, user)
        elif not self.passfile.exists():
            raise StackError(
                f"{self.passfile} is missing but the cluster in {server / 'data'} exists: "
                "its password is lost; remove the service directory to start afresh"
            )

    def _make_server_dir(self, user: _process.RunAs | None) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if user is None or _reachable(self.server_link, user):
            target = self.server_link
        else:
            digest = hashlib.sha256(str(self.dir.resolve()).encode()).hexdigest()[:12]
            _RELOCATED_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
            target = _RELOCATED_ROOT / f"postgres-{digest}"
        for directory in (target, target / "run"):
            directory.mkdir(mode=0o700, exist_ok=True)
            if user is not None:
                os.chown(directory, user.uid, user.gid)
        if target != self.server_link:
            self.server_link.symlink_to(target, target_is_directory=True)

    def _initdb(self, server: Path, user: _process.RunAs | None) -> None:
        password = self._password()
        pwfile = server / "initdb.pw"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(password + "\n")
        if user is not None:
            os.chown(pwfile, user.uid, user.gid)
        try:
            done = subprocess.run(  # noqa: S603 - argv built here, no shell
                [str(find_bin_dir() / "initdb"), "-D", str(server / "data"), "-U", ROLE,
                 f"--pwfile={pwfile}", "--auth-host=scram-sha-256",
                 "--auth-local=scram-sha-256", "--encoding=UTF8", "--no-locale"],
                capture_output=True, text=True, check=False, cwd=server,
                **(user.popen_args() if user is not None else {}),
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise StackError(f"initdb of {server / 'data'} failed:\n{tail}")

    def _password(self) -> str:
        """The clients' password: read from the password file, or made and stored."""
        if self.passfile.exists():
            line = self.passfile.read_text().strip()
            return line.rsplit(":", 1)[-1]
        password = secrets.token_urlsafe(24)
        self.passfile.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.passfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(f"{LOOPBACK}:*:*:{ROLE}:{password}\n")
        return password

    def healthy(self) -> bool:
        """A real session answers ``SELECT 1``."""
        psycopg = _psycopg()
        try:
            with psycopg.connect(self.database_url("postgres"), connect_timeout=2) as conn:
                return bool(conn.execute("SELECT 1").fetchone() == (1,))
        except psycopg.Error:
            return False

    def after_start(self) -> None:
        """Create the ``gridstream`` database when missing."""
        psycopg = _psycopg()
        from psycopg import sql

        try:
            with psycopg.connect(
                self.database_url("postgres"), connect_timeout=5, autocommit=True
            ) as conn:
                found = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
                ).fetchone()
                if found is None:
                    with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # a racing up
                        conn.execute(
                            sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE))
                        )
        except psycopg.Error as exc:
            raise StackError(f"postgres: creating database {DATABASE!r} failed") from exc
