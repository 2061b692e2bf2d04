"""pg.py: the PostgreSQL server of one test process (issue 19's second backend matrix).

With SLUICE_TEST_DATABASE=postgresql every Gateway of tests/it/lib/harness.py gets a
database of its own on one server that this module starts the first time one is asked
for: initdb into the test output folder, unix socket only, no durability (a test's data
is thrown away), stopped at exit by its PID. The harness's gw.sql / gw.sql_write keep
SQLite's dialect with ? placeholders; to_pg() makes the few changes psycopg2 needs."""
import atexit
import decimal
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time

PG_BIN = os.environ.get("SLUICE_PG_BIN", "/usr/lib/postgresql/15/bin")
# A socket path is at most 107 bytes (sun_path); the file in the folder is ".s.PGSQL.5432".
_SUN_PATH_MAX = 107 - len("/.s.PGSQL.5432")


def enabled():
    return os.environ.get("SLUICE_TEST_DATABASE", "") == "postgresql"


def _psycopg2():
    """psycopg2 (Debian's python3-psycopg2). A python3 that is not Debian's (pyenv) does not
    see Debian's dist-packages: it is looked up there after the interpreter's own paths,
    which works for the same minor version."""
    try:
        import psycopg2
    except ImportError:
        debian = "/usr/lib/python3/dist-packages"
        if debian in sys.path or not os.path.isdir(debian):
            raise
        sys.path.append(debian)
        try:
            import psycopg2
        except ImportError as e:
            raise RuntimeError("SLUICE_TEST_DATABASE=postgresql needs psycopg2 (apt-get install python3-psycopg2) "
                               "for %s: %s" % (sys.executable, e))
    return psycopg2


def _reachable_by(path, uid):
    """Every folder above path lets others through (the server runs as postgres, not us)."""
    if uid == os.geteuid():
        return True
    p = os.path.abspath(path)
    while p != "/":
        p = os.path.dirname(p)
        if not os.stat(p).st_mode & 0o001:
            return False
    return True


class Server:
    """One postgres under base/: data/ (removed at stop), sock/ (its unix socket), pg.log (kept)."""

    def __init__(self, outdir):
        self.as_root = os.geteuid() == 0
        owner = pwd.getpwnam("postgres") if self.as_root else pwd.getpwuid(os.geteuid())
        base = os.path.join(os.path.abspath(outdir), "pg-%d" % os.getpid())
        # postgres must reach its folders, and the socket path must fit: else a folder in /tmp.
        if not _reachable_by(outdir, owner.pw_uid) or len(os.path.join(base, "sock")) > _SUN_PATH_MAX:
            base = os.path.join("/tmp", "sluice-pg-%d" % os.getpid())
        self.base = base
        self.data, self.sock = os.path.join(base, "data"), os.path.join(base, "sock")
        self.log = os.path.join(base, "pg.log")
        shutil.rmtree(base, ignore_errors=True)
        for d in (base, self.sock):
            os.makedirs(d, mode=0o700)
            os.chown(d, owner.pw_uid, owner.pw_gid)
        # The superuser is named after the user the tests run as: then a URL without a user
        # (what libpq takes by default, like the gateways and sluicectl do) is let in (-A trust).
        self.user = pwd.getpwuid(os.geteuid()).pw_name
        self.pid = None
        t0 = time.time()
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", self.user, "-E", "UTF8", "--locale=C",
                  "--no-sync", "--no-instructions")
        t1 = time.time()
        opts = ("-c listen_addresses='' -c unix_socket_directories='%s' -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off -c max_connections=%s -c shared_buffers=32MB"
                % (self.sock, os.environ.get("SLUICE_TEST_PG_MAX_CONNECTIONS", "400")))
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "30", "-o", opts, "start")
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline())
        self.started_in = (t1 - t0, time.time() - t1)      # initdb, start (seconds)
        self.n = 0
        self._admin = None

    def _run(self, prog, *args):
        cmd = [os.path.join(PG_BIN, prog)] + list(args)
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd="/")
        if p.returncode != 0:
            raise RuntimeError("%s failed (%d): %s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
        return p

    def url(self, dbname):
        return "postgresql:///%s?host=%s" % (dbname, self.sock)

    def create_database(self, name):
        """A new empty database for a gateway called name: its URL."""
        self.n += 1
        dbname = "sluice_%s_%d" % (re.sub(r"[^a-z0-9_]", "_", name.lower())[:40], self.n)
        if self._admin is None:
            self._admin = _psycopg2().connect(self.url("postgres"))
            self._admin.autocommit = True
        with self._admin.cursor() as cur:
            cur.execute('CREATE DATABASE "%s"' % dbname)
        return self.url(dbname)

    def stop(self):
        """Immediate stop by the data folder (pg_ctl), then by the PID should it be left;
        the data go, the log stays."""
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:
                pass
            self._admin = None
        if self.pid is None:
            return
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "-t", "10", "stop")
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        deadline = time.time() + 10
        while _alive(self.pid) and time.time() < deadline:
            time.sleep(0.05)
        if _alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)
        self.pid = None
        shutil.rmtree(self.data, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose (pg_ctl's child is reaped by init, not us).
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


_server = None


def server(outdir):
    """The server of this test process, started on first use and stopped at exit (also
    when the run is ended by SIGTERM, as tests/run-all's timeout does)."""
    global _server
    if _server is None:
        _server = Server(outdir)
        atexit.register(_stop_server)
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return _server


def _stop_server():
    global _server
    if _server is not None:
        _server.stop()
        _server = None


# ---- SQLite-dialect queries through psycopg2 ----

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?(\d*)|%|[^'\"?%]+", re.S)
_REWRITES = [
    (re.compile(r"strftime\(\s*'%s'\s*,\s*'now'\s*\)", re.I), "CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)"),
    # SQLite's total(): a sum that is 0.0, not NULL, over no rows.
    (re.compile(r"\btotal\(([^()]*)\)", re.I), r"COALESCE(SUM(\1), 0.0)"),
    # SQLite's storage classes from PostgreSQL's column types (typeof of one column).
    (re.compile(r"\btypeof\(\s*(\w+)\s*\)", re.I),
     r"(CASE WHEN \1 IS NULL THEN 'null' WHEN pg_typeof(\1)::text IN ('bigint', 'integer', 'smallint') THEN 'integer' "
     r"WHEN pg_typeof(\1)::text IN ('double precision', 'real', 'numeric') THEN 'real' "
     r"WHEN pg_typeof(\1)::text = 'bytea' THEN 'blob' ELSE 'text' END)"),
]


def to_pg(query, params):
    """(query, params) for psycopg2: ? and ?N become %s / %(pN)s, a literal % becomes %%
    (outside quotes; quoted text is left as it is, as SQLite reads it), and the few SQLite
    functions the tests use become PostgreSQL's."""
    for pat, repl in _REWRITES:
        query = pat.sub(repl, query)
    out, numbered = [], False
    for m in _TOKEN.finditer(query):
        tok = m.group(0)
        if tok.startswith("?"):
            if m.group(1):
                numbered = True
                out.append("%%(p%s)s" % m.group(1))
            else:
                out.append("%s")
        elif tok == "%" or tok.startswith("'"):
            out.append(tok.replace("%", "%%"))
        else:
            out.append(tok)
    q = "".join(out)
    if numbered:
        return q, {"p%d" % (i + 1): v for i, v in enumerate(params)}
    return q, tuple(params)


def _plain(v):
    """A value as sqlite3 would give it: sums and counts are int, not Decimal; blobs bytes."""
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, memoryview):
        return v.tobytes()
    return v


def connect(url):
    return _psycopg2().connect(url)


def execute(url, query, params, write=False, dicts=False):
    """Runs one query: its rows as tuples (dicts: {column: value}) or, with write, the
    number of rows it changed, committed."""
    q, p = to_pg(query, params)
    con = connect(url)
    try:
        with con.cursor() as cur:
            cur.execute(q, p)
            if write:
                con.commit()
                return cur.rowcount
            rows = [tuple(_plain(v) for v in r) for r in cur.fetchall()] if cur.description else []
            if dicts:
                names = [d[0] for d in cur.description]
                return [dict(zip(names, r)) for r in rows]
            return rows
    finally:
        con.close()


def executemany(url, query, seq):
    con = connect(url)
    try:
        with con.cursor() as cur:
            for params in seq:
                q, p = to_pg(query, params)
                cur.execute(q, p)
        con.commit()
    finally:
        con.close()
