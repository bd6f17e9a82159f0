"""A throwaway PostgreSQL cluster for tests and fault scripts: ``initdb`` in a temporary
folder, a server on a free loopback port (and a private socket folder), one database, trust
authentication from loopback only. As root the server runs as the ``postgres`` user (initdb
and postgres refuse root), which Debian's ``postgresql`` package creates.

    with PgCluster() as pg:           # initdb + start; stopped and removed on exit
        url = pg.url                  # postgres://postgres@127.0.0.1:<port>/quorum
        pg.restart("fast")            # pg_ctl restart -m fast
        pg.restart("immediate")       # pg_ctl stop -m immediate (crash recovery on start)
        pg.psql("SELECT 1")

The binaries are looked up in ``$QUORUM_PG_BIN``, then ``PATH``, then
``/usr/lib/postgresql/<newest>/bin`` (where Debian puts them). ``missing()`` says why
PostgreSQL cannot be used here, or returns "".
"""

from __future__ import annotations

import abc
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

INSTALL_HINT = ("PostgreSQL is not installed: install the server binaries (Debian/Ubuntu: "
                "`apt-get install postgresql`; .ci/run does) or point $QUORUM_PG_BIN at the "
                "folder holding initdb, pg_ctl and postgres.")
TOOLS = ("initdb", "pg_ctl", "postgres")


def bin_dir() -> Path | None:
    """The folder with initdb, pg_ctl and postgres, or None."""
    candidates = []
    if os.environ.get("QUORUM_PG_BIN"):
        candidates.append(Path(os.environ["QUORUM_PG_BIN"]))
    found = shutil.which("pg_ctl")
    if found:
        candidates.append(Path(os.path.realpath(found)).parent)

    def version(path: str) -> float:
        try:
            return float(Path(path).parent.name)
        except ValueError:
            return 0.0

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                                           key=version, reverse=True)]
    for folder in candidates:
        if all((folder / tool).is_file() and os.access(folder / tool, os.X_OK) for tool in TOOLS):
            return folder
    return None


def missing() -> str:
    """Why a cluster cannot start on this machine ("" when it can)."""
    if bin_dir() is None:
        return INSTALL_HINT
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return ("running as root, and there is no `postgres` user to run the server as "
                    "(Debian's postgresql package creates it; or run as a normal user)")
    return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_folder(prefix: str) -> tuple[Path, dict]:
    """A new temporary folder for a server process, and how to run that process
    (``subprocess`` keyword arguments): as root, as the ``postgres`` user (PostgreSQL and
    PgBouncer refuse root), in a folder under /tmp that user can read."""
    run_as: dict = {}
    base = None
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        run_as = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        base = "/tmp" if os.path.isdir("/tmp") else None  # noqa: S108 - readable by postgres
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base)), run_as


class _Server(abc.ABC):
    """A context manager over ``start`` and ``close`` (each server's own): closed when
    starting fails too."""

    @abc.abstractmethod
    def start(self): ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()


class PgCluster(_Server):
    """One PostgreSQL server in a temporary folder. ``fsync=False`` is faster and safe for
    anything but a machine crash (an immediate stop is still recovered from the WAL)."""

    def __init__(self, *, database: str = "quorum", fsync: bool = True,
                 max_connections: int = 200, prefix: str = "quorum-pg-",
                 settings: dict | None = None):
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        self.bin = bin_dir()
        self.database = database
        self.fsync = fsync
        self.max_connections = max_connections
        self.prefix = prefix
        self.settings = dict(settings or {})  # more server settings (-c name=value)
        self.port = 0
        self.dir: Path | None = None
        self.user = "postgres"
        self._run_as: dict = {}
        self._created = False
        self.running = False

    # --- paths and URLs ----------------------------------------------------------------------
    @property
    def data(self) -> Path:
        return self.dir / "data"

    @property
    def sockets(self) -> Path:
        return self.dir / "sock"

    @property
    def log_path(self) -> Path:
        return self.dir / "server.log"

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def dsn(self, database: str | None = None) -> str:
        return (f"host=127.0.0.1 port={self.port} user={self.user} "
                f"dbname={database or self.database} connect_timeout=5")

    # --- running the tools ---------------------------------------------------------------------
    def _tool(self, name: str, *args: str, timeout: float = 120, check: bool = True):
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8",
               "TZ": "UTC", "HOME": str(self.dir)}
        proc = subprocess.run([str(self.bin / name), *args], env=env, cwd=self.dir,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, **self._run_as)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} failed ({proc.returncode}):\n"
                               f"{proc.stdout}{proc.stderr}\n{self.server_log()[-3000:]}")
        return proc

    def server_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except (OSError, TypeError):
            return ""

    def _options(self) -> str:
        opts = {"port": self.port, "listen_addresses": "127.0.0.1",
                "unix_socket_directories": str(self.sockets),
                "max_connections": self.max_connections, "fsync": "on" if self.fsync else "off",
                "synchronous_commit": "on" if self.fsync else "off",
                "full_page_writes": "on" if self.fsync else "off",
                "shared_buffers": "32MB", "log_min_messages": "warning",
                "log_connections": "off", "logging_collector": "off", **self.settings}
        return " ".join(f"-c {k}={v}" for k, v in opts.items())

    # --- life cycle ------------------------------------------------------------------------------
    def start(self) -> PgCluster:
        """initdb (the first time), then start the server and create the database."""
        if self.dir is None:
            self._init()
        for attempt in range(5):
            if not self.port:
                self.port = free_port()
            proc = self._tool("pg_ctl", "-D", str(self.data), "-l", str(self.log_path), "-w",
                              "-t", "60", "-o", self._options(), "start", check=False)
            if proc.returncode == 0:
                break
            if "could not bind" in self.server_log() and attempt < 4:
                self.port = 0  # taken meanwhile: another port
                continue
            raise RuntimeError(f"pg_ctl start failed:\n{proc.stdout}{proc.stderr}\n"
                               f"{self.server_log()[-3000:]}")
        self.running = True
        self.wait_ready()
        if not self._created:
            self.psql(f'CREATE DATABASE "{self.database}"', database="postgres")
            self._created = True
        return self

    def _init(self) -> None:
        self.dir, self._run_as = postgres_folder(self.prefix)
        self.sockets.mkdir()
        if self._run_as:
            for path in (self.dir, self.sockets):
                os.chown(path, self._run_as["user"], self._run_as["group"])
        for locale in ("C.UTF-8", "C"):  # C.UTF-8 where the C library has it
            proc = self._tool("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust",
                              "--encoding=UTF8", f"--locale={locale}", "--no-sync",
                              timeout=180, check=False)
            if proc.returncode == 0:
                return
            shutil.rmtree(self.data, ignore_errors=True)
        raise RuntimeError(f"initdb failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the server accepts a query (crash recovery after an immediate stop)."""
        import psycopg

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error as exc:
                last = exc
                time.sleep(0.1)
        raise TimeoutError(f"PostgreSQL not ready after {timeout} s: {last}\n"
                           f"{self.server_log()[-2000:]}")

    def stop(self, mode: str = "fast") -> None:
        """``mode``: smart, fast (disconnect clients, checkpoint) or immediate (no checkpoint:
        the next start replays the WAL, as after a crash)."""
        if self.running:
            self._tool("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")
            self.running = False

    def restart(self, mode: str = "fast", down: float = 0.0) -> float:
        """Stop (``mode``) and start again on the same port after ``down`` seconds; returns
        the seconds the server was unavailable."""
        started = time.monotonic()
        if mode == "fast" and not down:
            self._tool("pg_ctl", "-D", str(self.data), "-l", str(self.log_path), "-w", "-t",
                       "60", "-m", "fast", "-o", self._options(), "restart")
            self.running = True
        else:
            self.stop(mode)
            time.sleep(down)
            self.start()
        self.wait_ready()
        return time.monotonic() - started

    def psql(self, sql: str, database: str | None = None) -> list[tuple]:
        """Run one statement (autocommit) and return its rows."""
        import psycopg

        with psycopg.connect(self.dsn(database), autocommit=True) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    def amcheck(self) -> tuple[bool, str]:
        """pg_amcheck on the database (heap and every B-tree index, with their tuples):
        (True, output) when it finds nothing; (True, "not available") without the tool."""
        if not (self.bin / "pg_amcheck").is_file():
            return True, "pg_amcheck not available"
        proc = self._tool("pg_amcheck", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
                          "--install-missing", "--heapallindexed", "--parent-check",
                          "--rootdescend", self.database, check=False, timeout=600)
        return proc.returncode == 0, (proc.stdout + proc.stderr).strip()

    def close(self) -> None:
        """Stop the server (immediately) and remove its folder."""
        try:
            if self.dir is not None and (self.data / "postmaster.pid").exists():
                self._tool("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30",
                           "stop", check=False)
        finally:
            self.running = False
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None


@contextlib.contextmanager
def cluster(**kwargs):
    with PgCluster(**kwargs) as pg:
        yield pg


PGBOUNCER_HINT = ("PgBouncer is not installed: install it (Debian/Ubuntu: `apt-get install "
                  "pgbouncer`; .ci/run does) or point $QUORUM_PGBOUNCER at its binary.")


def pgbouncer_bin() -> str | None:
    """The pgbouncer binary: ``$QUORUM_PGBOUNCER``, then ``PATH``, then ``/usr/sbin``."""
    for candidate in (os.environ.get("QUORUM_PGBOUNCER"), shutil.which("pgbouncer"),
                      "/usr/sbin/pgbouncer"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


class PgBouncer(_Server):
    """PgBouncer in transaction mode in front of ``cluster`` (every database of it), on a free
    loopback port, trust authentication, at most ``pool_size`` server connections a database
    and user: what a managed database's pooler does to its clients. As root it runs as the
    ``postgres`` user, as the server does (PgBouncer refuses root).

        with PgCluster() as pg, PgBouncer(pg, pool_size=4) as bouncer:
            url = bouncer.url("quorum")
    """

    def __init__(self, cluster: PgCluster, *, pool_size: int = 10):
        self.cluster = cluster
        self.pool_size = pool_size
        self.port = 0
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None

    def url(self, database: str | None = None) -> str:
        return (f"postgres://{self.cluster.user}@127.0.0.1:{self.port}/"
                f"{database or self.cluster.database}")

    def log(self) -> str:
        try:
            return (self.dir / "pgbouncer.log").read_text(errors="replace") if self.dir else ""
        except OSError:
            return ""

    def start(self) -> PgBouncer:
        binary = pgbouncer_bin()
        if binary is None:
            raise RuntimeError(PGBOUNCER_HINT)
        self.dir, run_as = postgres_folder("quorum-pgbouncer-")
        self.port = free_port()
        (self.dir / "userlist.txt").write_text(f'"{self.cluster.user}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={self.cluster.port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.dir / 'userlist.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\nmax_client_conn = 1000\n"
            f"logfile = {self.dir / 'pgbouncer.log'}\npidfile = {self.dir / 'pgbouncer.pid'}\n"
            "ignore_startup_parameters = extra_float_digits\n")
        if run_as:
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, run_as["user"], run_as["group"])
        self.proc = subprocess.Popen([binary, str(self.dir / "pgbouncer.ini")], cwd=self.dir,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, **run_as)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited ({self.proc.returncode}): "
                                   f"{self.proc.stderr.read().decode(errors='replace')}"
                                   f"\n{self.log()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=0.5):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"pgbouncer did not listen in 20 s:\n{self.log()[-2000:]}")

    def close(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            if self.proc is not None and self.proc.stderr is not None:
                self.proc.stderr.close()
            self.proc = None
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
