"""harness.py: start a real lighttpd + sluice-fcgi pool + stand-in upstreams for end-to-end tests.

Every test file builds on this (like git's t/lib-httpd.sh): real processes, real SQLite,
real loopback sockets. Processes are ended by PID, only those this harness started.
With SLUICE_TEST_DATABASE=postgresql (tests/run-all's it-pg suite) each Gateway's system of
record is a database of its own on a PostgreSQL server the test process starts (pg.py)."""
import atexit
import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import traceback

import pg

BUILDDIR = os.environ.get("SLUICE_BUILDDIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "../../..")))
SRCDIR = os.environ.get("SLUICE_SRCDIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "../../..")))
OUTDIR = os.environ.get("SLUICE_TEST_OUT", os.path.join(BUILDDIR, "test-output"))
LIGHTTPD = shutil.which("lighttpd") or "/usr/sbin/lighttpd"
# The front server the suite runs behind (issue 13): lighttpd (bin-path), or nginx with the
# installed-style snippet conf/nginx-sluice.conf.in against `sluice-fcgi --listen` (and the
# admin CGI under fcgiwrap). tests/run-all runs a part of the suite again behind nginx.
FRONT = os.environ.get("SLUICE_FRONT", "lighttpd")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
FCGIWRAP = shutil.which("fcgiwrap") or "/usr/sbin/fcgiwrap"
APACHE = shutil.which("apache2") or "/usr/sbin/apache2"
APACHE_MODULES = "/usr/lib/apache2/modules"
CTL = os.environ.get("SLUICE_CTL", os.path.join(BUILDDIR, "admin", "sluicectl"))
FAKE = os.path.join(BUILDDIR, "tests", "fake", "sluice-fake-upstream")
FCGI = os.path.join(BUILDDIR, "fcgi", "sluice-fcgi")
HEALTHD = os.path.join(BUILDDIR, "healthd", "sluice-healthd")
# A command the front server starts each responder through, e.g.
# SLUICE_FCGI_WRAP="valgrind --tool=callgrind" (tests/perf/icount); unset: sluice-fcgi itself.
FCGI_WRAP = os.environ.get("SLUICE_FCGI_WRAP", "")

# Sanitizer builds: tests/run-all names a folder for the test's reports. ASan writes
# there itself; UBSan (gcc) writes only to stderr, so a report in the stderr of a program
# a test ran with subprocess.run(capture_output=...) is copied there as well.
SANITIZER_REPORTS = os.environ.get("SLUICE_SANITIZER_REPORTS")
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "SUMMARY: AddressSanitizer", "SUMMARY: UndefinedBehaviorSanitizer")
if SANITIZER_REPORTS:
    _subprocess_run = subprocess.run

    def _run_keeping_reports(*args, **kwargs):
        p = _subprocess_run(*args, **kwargs)
        err = p.stderr.decode(errors="replace") if isinstance(p.stderr, bytes) else (p.stderr or "")
        if any(m in err for m in SANITIZER_MARKS):
            with open(os.path.join(SANITIZER_REPORTS, "stderr.%d" % os.getpid()), "a") as f:
                f.write("$ %r\n%s\n" % (p.args, err))
        return p

    subprocess.run = _run_keeping_reports


def _front_outdir():
    """Where a gateway's folder goes: OUTDIR, unless Apache (its children run as www-data
    when the tests run as root) could not get there through a folder closed to others: then
    a folder of its own under /tmp, said once."""
    if FRONT != "apache" or os.geteuid() != 0:
        return OUTDIR
    p = os.path.abspath(OUTDIR)
    while p != "/":
        p = os.path.dirname(p)
        if not os.stat(p).st_mode & 0o001:
            alt = os.path.join("/tmp", "sluice-apache-tests")
            os.makedirs(alt, exist_ok=True)
            os.chmod(alt, 0o755)
            return alt
    return OUTDIR


def on_postgresql():
    """The suite runs on PostgreSQL (SLUICE_TEST_DATABASE=postgresql): gw.db is a URL, not a file."""
    return pg.enabled()


class Skip(Exception):
    """Raised by a test that does not apply here: run_tests counts it as skipped (neither
    passed nor failed) and prints why."""


def skip_on_postgresql(why):
    """A test of SQLite itself (its file, WAL, PRAGMA, a lock on the file): skipped on PostgreSQL."""
    if on_postgresql():
        raise Skip("SQLite only: " + why)


def sqlite_only(why):
    """For one check inside a test that is SQLite's own: True on SQLite; on PostgreSQL False,
    with the skipped check said in the test's output."""
    if not on_postgresql():
        return True
    print("   skipped check on PostgreSQL (SQLite only): %s" % why, flush=True)
    return False


# URL -> key file of a PostgreSQL database: a Gateway given db= of another shares its key too.
_PG_KEY_FILES = {}


def listening(port):
    """Something accepts connections on 127.0.0.1:port."""
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


def port_is_free(port):
    """Nothing is bound to 127.0.0.1:port any more (what a test started has gone)."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def threads_of(pid):
    """The number of threads of process pid (its /proc status)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def burst(fn, n, stagger=0.0):
    """fn(0) .. fn(n-1) at once, each on a thread of its own (started stagger seconds apart):
    their results in order, an exception in place of a result that raised."""
    out = [None] * n
    def one(i):
        try:
            out[i] = fn(i)
        except Exception as e:      # the test asserts on it
            out[i] = e
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
        if stagger:
            time.sleep(stagger)
    for t in ts:
        t.join(60)
    return out


def wait_for(cond, timeout=5.0, interval=0.05, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.1fs waiting for %s (last value %r)" % (timeout, what, last))


class Response:
    def __init__(self, status, headers, body, elapsed):
        self.status = status
        self.headers = headers          # lower-case name -> value (last one wins)
        self.header_list = []           # [(name, value)] as received
        self.body = body
        self.elapsed = elapsed

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<%d %r>" % (self.status, self.body[:300])


def http_request(port, method, path, body=None, headers=None, timeout=30):
    t0 = time.time()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    hdrs = dict(headers or {})
    if body is not None and not any(k.lower() == "content-type" for k in hdrs):
        hdrs["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=hdrs)
    resp = conn.getresponse()
    data = resp.read()
    r = Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data, time.time() - t0)
    r.header_list = resp.getheaders()
    conn.close()
    return r


# Every stand-in this process started: any still running at exit is stopped then (a setup
# that failed after starting one, before its teardown could know of it, leaves none behind).
_FAKES = []


def _stop_fakes():
    for f in _FAKES:
        f.stop()


atexit.register(_stop_fakes)


class Fake:
    """One stand-in upstream (tests/fake/sluice-fake-upstream)."""

    def __init__(self, name="fake", port=0):
        self.name = name
        log = open(os.path.join(OUTDIR, "fake-%s-%d.log" % (name, os.getpid())), "ab")
        self.proc = subprocess.Popen([FAKE, "--port", str(port), "--name", name],
                                     stdout=subprocess.PIPE, stderr=log)
        _FAKES.append(self)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            raise RuntimeError("fake upstream did not start: %r" % line)
        self.port = int(line.split()[2])
        self.url = "http://127.0.0.1:%d" % self.port

    def _req(self, method, path, body=None):
        return http_request(self.port, method, path, body=body, headers={"Content-Type": "text/plain"})

    def behavior(self, directives=""):
        self._req("POST", "/_fake/behavior", directives)

    def reset(self):
        self._req("POST", "/_fake/reset", "")

    def stats(self):
        return self._req("GET", "/_fake/stats").json()

    def health(self, on):
        self._req("POST", "/_fake/health", "on" if on else "off")

    def metrics(self, **kv):
        """vLLM gauges for /metrics: waiting=N, kv=0.42, running=N, legacy=0|1."""
        r = self._req("POST", "/_fake/metrics", " ".join("%s=%s" % i for i in kv.items()))
        assert r.status == 200, r

    def sleep_config(self, **kv):
        """Sleep mode: delay_ms=N (how long /wake_up takes), sleeping=0|1."""
        r = self._req("POST", "/_fake/sleep-config", " ".join("%s=%s" % i for i in kv.items()))
        assert r.status == 200, r

    def dcgm(self, *temps):
        """DCGM stand-in readings at /dcgm/metrics, one per GPU; None = DCGM's blank sentinel."""
        r = self._req("POST", "/_fake/dcgm", "temps=" + "/".join("blank" if t is None else str(t) for t in temps))
        assert r.status == 200, r

    def stop(self):
        stop_process(self.proc, 5)
        self.proc = None


def stop_process(proc, wait_s):
    """Ends a process this harness started (a Popen): SIGTERM, then SIGKILL after wait_s."""
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Healthd:
    """sluice-healthd --forever on a Gateway's database and state file (its sluice.conf),
    with short rounds so tests are fast. Ended by PID."""

    def __init__(self, gw, round_ms=300, timeout_ms=1000):
        self.gw = gw
        self.args = [HEALTHD, "-c", gw.conf_path, "--forever", "--round-ms", str(round_ms),
                     "--timeout-ms", str(timeout_ms)]
        self.proc = None
        self.start()

    def start(self):
        log = open(os.path.join(self.gw.dir, "healthd.out"), "ab")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=log)
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def log_text(self):
        try:
            with open(os.path.join(self.gw.dir, "healthd.out")) as f:
                return f.read()
        except OSError:
            return ""


def on_redis():
    """The suite runs with a Redis `state` for every gateway (SLUICE_TEST_STATE=redis)."""
    return os.environ.get("SLUICE_TEST_STATE", "") == "redis"


def skip_on_redis(why):
    """For a test of what the state file does itself: with a Redis `state` it says why and
    is skipped (returns True)."""
    if on_redis():
        print("   skipped with a Redis state: %s" % why)
        return True
    return False


_REDIS_OF_DB = {}


def _redis_for(db):
    """The redis-server of a system of record (several "hosts" on one database share it),
    started the first time, stopped at exit by its PID."""
    if db not in _REDIS_OF_DB:
        from redis_server import Redis
        folder = os.path.join(OUTDIR, "redis-%d-%d" % (os.getpid(), len(_REDIS_OF_DB)))
        if len(folder) > 90:                # sun_path: at most 107 bytes with "/redis.sock"
            folder = "/tmp/sluice-redis-%d-%d" % (os.getpid(), len(_REDIS_OF_DB))
        r = Redis(folder)
        _REDIS_OF_DB[db] = r
        atexit.register(r.stop)
    return _REDIS_OF_DB[db]


class Gateway:
    """A real lighttpd in front of a sluice-fcgi pool, on a free port, with its own state dir."""

    def __init__(self, name, procs=2, threads=16, keepalive_ms=1000, conf=None, peak_threads=None, db=None):
        """conf: {"passive": "ban_ms = 2000; ...", "billing_tz": '"UTC"'} replaces that
        group's (or setting's) line of conf/sluice.conf.in. db: the database of another
        Gateway (several "hosts" on one system of record, issue 19): used as it is, not
        initialised again; its key file beside it is shared too."""
        self.name = name
        self.dir = os.path.join(_front_outdir(), "%s-%d" % (name, os.getpid()))
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir, mode=0o750)
        os.chmod(self.dir, 0o750)               # R-SEC-9: the state folder is 0750
        if pg.enabled():
            # A URL has no folder to keep the key beside: the key is in the (first) gateway's folder.
            self.db = db or pg.server(OUTDIR).create_database(name)
            self.key_file = _PG_KEY_FILES.setdefault(self.db, os.path.join(self.dir, "sluice.key"))
        else:
            self.db = db or os.path.join(self.dir, "sluice.db")
            self.key_file = os.path.join(os.path.dirname(self.db), "sluice.key")   # the default: beside the database
        self.port = free_port()
        self.procs, self.threads = procs, threads
        # The front server is sized for the threads a responder may grow to at the
        # peak (pool.max_threads), not only the pool.threads it starts with.
        self.peak_threads = max(peak_threads or threads, threads)
        self.conf_path = os.path.join(self.dir, "sluice.conf")
        with open(os.path.join(SRCDIR, "conf", "sluice.conf.in")) as f:
            text = f.read()
        text = (text.replace("@STATE_DIR@", self.dir).replace("@PROCS@", str(procs))
                .replace("@THREADS@", str(threads)).replace("@KEEPALIVE_MS@", str(keepalive_ms)))
        # Tests poll with keys that are not valid yet (or any more): the R-SEC-6
        # failure budget is lifted unless a test sets the auth group itself.
        conf = dict(conf or {})
        conf.setdefault("auth", "key_cache_ms = 30000; fail_limit = 1000000; fail_window_ms = 60000;")
        if db or pg.enabled():
            conf.setdefault("database", '"%s"' % self.db)
        if pg.enabled():
            conf.setdefault("secrets", 'key_file = "%s";' % self.key_file)
        # SLUICE_TEST_STATE=redis (tests/run-all's it-pg suite): the gateways of one system
        # of record share a redis-server of their own (issue 19's second backend matrix:
        # PostgreSQL + Redis). SLUICE_TEST_STATE=redis+unix:///PATH: that Redis, by hand.
        if on_redis() and "state" not in conf:
            conf["state"] = '"redis+unix://%s"' % _redis_for(self.db).sock
        elif os.environ.get("SLUICE_TEST_STATE", "").startswith("redis"):
            conf.setdefault("state", '"%s"' % os.environ["SLUICE_TEST_STATE"])
        for k, v in conf.items():
            lines = text.split("\n")
            for i, line in enumerate(lines):
                if line.startswith(k + ":") or line.startswith(k + " ="):
                    lines[i] = ("%s: { %s };" % (k, v)) if ":" in line.split("=")[0] else "%s = %s;" % (k, v)
                    break
            else:
                raise ValueError("no setting %s in sluice.conf.in" % k)
            text = "\n".join(lines)
        with open(self.conf_path, "w") as f:
            f.write(text)
        if not db:
            self.ctl("init")
        self.proc = None

    def ctl_argv(self):
        """sluicectl on this gateway's database (and, on PostgreSQL, its key file): the
        start of a command line a test adds its arguments to."""
        return [CTL, "--db", self.db] + (["--key-file", self.key_file] if pg.enabled() else [])

    def ctl(self, *args, check=True):
        args = [str(a) for a in args]
        # The pool's state file is beside the database by default: a URL has no "beside",
        # so on PostgreSQL the commands that read it are told where it is.
        if pg.enabled() and "--state" not in args and (args[:1] == ["stats"] or args[:2] == ["node", "temperature"]):
            args += ["--state", os.path.join(self.dir, "sluice.state")]
        p = subprocess.run(self.ctl_argv() + ["--json"] + args,
                           capture_output=True, text=True, timeout=30)
        if check and p.returncode != 0:
            raise AssertionError("sluicectl %s failed (%d): %s %s" % (" ".join(map(str, args)), p.returncode,
                                                                     p.stdout, p.stderr))
        try:
            return json.loads(p.stdout) if p.stdout.strip() else {}
        except ValueError:
            raise AssertionError("sluicectl %s printed non-JSON: %r" % (args, p.stdout))

    def ctl_secret(self, secret, *args, check=True):
        """ctl with an upstream credential on stdin (--upstream-auth-stdin), as an operator
        types it; sluicectl must never print it (R-ANT-4). Returns what ctl returns; with
        check=False the finished process instead (returncode, stdout, stderr), for a
        refusal the test expects."""
        p = subprocess.run(self.ctl_argv() + ["--json"] + [str(a) for a in args] + ["--upstream-auth-stdin"],
                           input=secret + "\n", capture_output=True, text=True, timeout=30)
        assert secret not in p.stdout + p.stderr, "R-ANT-4: sluicectl printed the credential: %r" % p.stdout
        if not check:
            return p
        assert p.returncode == 0, "sluicectl %r failed: %s %s" % (args, p.stdout, p.stderr)
        return json.loads(p.stdout) if p.stdout.strip() else {}

    def sql(self, query, *params):
        """Rows (tuples) of a query in SQLite's dialect with ? parameters, on either engine."""
        if pg.enabled():
            return pg.execute(self.db, query, params)
        con = sqlite3.connect(self.db, timeout=10)
        try:
            return con.execute(query, params).fetchall()
        finally:
            con.close()

    def sql_write(self, query, *params):
        """A committed change (sql() only reads); responders see it within config.poll_ms."""
        if pg.enabled():
            return pg.execute(self.db, query, params, write=True)
        con = sqlite3.connect(self.db, timeout=10)
        try:
            with con:
                return con.execute(query, params).rowcount
        finally:
            con.close()

    def sql_write_many(self, query, seq):
        """One committed transaction of query run with each parameter tuple of seq."""
        if pg.enabled():
            return pg.executemany(self.db, query, seq)
        con = sqlite3.connect(self.db, timeout=10)
        try:
            with con:
                con.executemany(query, seq)
        finally:
            con.close()

    def write_lock(self, exclusive=False):
        """A context manager: while in it, nobody else can write the database (readers still
        can): SQLite's BEGIN IMMEDIATE (exclusive: BEGIN EXCLUSIVE) on the file, on PostgreSQL
        every table of the schema locked IN EXCLUSIVE MODE. Rolled back at the end."""
        return _WriteLock(self, exclusive)

    def upstream_auth(self, endpoint_id):
        """R-SEC-9: the endpoint's stored upstream_auth opened with the key file (open_sealed):
        the clear value, None for none, or an AssertionError if it is stored clear or does not open."""
        rows = self.sql("SELECT upstream_auth FROM endpoints WHERE id = ?", endpoint_id)
        assert rows, "no endpoint %s" % endpoint_id
        stored = rows[0][0]
        if stored is None:
            return None
        assert stored.startswith("enc1:"), "endpoint %s: upstream_auth is stored in clear" % endpoint_id
        with open(self.key_file, "rb") as f:
            plain = open_sealed(stored, f.read(), "endpoint:%d" % endpoint_id)
        assert plain is not None, "endpoint %s: upstream_auth does not open with %s" % (endpoint_id, self.key_file)
        return plain

    def _fcgi_bin(self):
        """The responder program the front server starts: sluice-fcgi, or with SLUICE_FCGI_WRAP
        a script in the gateway's folder that runs it through that command."""
        if not FCGI_WRAP:
            return FCGI
        path = os.path.join(self.dir, "sluice-fcgi-wrapped")
        with open(path, "w") as f:
            f.write('#!/bin/sh\nexec %s %s "$@"\n' % (FCGI_WRAP, FCGI))
        os.chmod(path, 0o755)
        return path

    def start(self):
        if FRONT == "nginx":
            return self._start_nginx()
        if FRONT == "apache":
            return self._start_apache()
        with open(os.path.join(self.dir, "lighttpd.conf"), "w") as f:
            subprocess.run([os.path.join(SRCDIR, "conf", "gen-lighttpd.sh"),
                            os.path.join(SRCDIR, "conf", "lighttpd.conf.in"), "127.0.0.1", str(self.port),
                            self.dir, self._fcgi_bin(), self.conf_path, os.path.join(SRCDIR, "www"), str(self.procs),
                            str(self.peak_threads), "8388608", "13"], stdout=f, check=True)
        log = open(os.path.join(self.dir, "lighttpd.out"), "ab")
        self.proc = subprocess.Popen([LIGHTTPD, "-D", "-f", os.path.join(self.dir, "lighttpd.conf")],
                                     stdout=log, stderr=log)
        self._wait_front("lighttpd")
        # The pool is spawned at start; wait until every responder is ready.
        wait_for(lambda: len(self.responder_pids()) >= self.procs, 10, what="responders")
        return self

    def _wait_front(self, what):
        wait_for(lambda: listening(self.port), 10, what="%s on port %d" % (what, self.port))

    def _start_pool(self, sock, out):
        """sluice-fcgi --listen on sock: the pool of a front that starts no FastCGI programs."""
        self.sup = subprocess.Popen([self._fcgi_bin(), "--listen", "unix:" + sock, "--processes", str(self.procs), "-c",
                                     self.conf_path], env=dict(os.environ, SLUICE_CONF=self.conf_path),
                                    stdout=out, stderr=out)

    def _start_nginx(self):
        """nginx in front: the pool under its own supervisor, the admin CGI under fcgiwrap,
        nginx.conf a server { } that includes conf/nginx-sluice.conf.in filled in for this dir."""
        sock, wrap = os.path.join(self.dir, "sluice-fcgi.sock"), os.path.join(self.dir, "fcgiwrap.sock")
        env = dict(os.environ, SLUICE_CONF=self.conf_path)
        out = open(os.path.join(self.dir, "front.out"), "ab")
        self._start_pool(sock, out)
        self.wrap = subprocess.Popen([FCGIWRAP, "-s", "unix:" + wrap], env=env, stdout=out, stderr=out)
        with open(os.path.join(SRCDIR, "conf", "nginx-sluice.conf.in")) as f:
            snippet = f.read()
        for k, v in (("@SOCKET@", sock), ("@WWW_DIR@", os.path.join(SRCDIR, "www")),
                     ("@ADMIN_CGI@", os.path.join(BUILDDIR, "admin", "sluice-admin.cgi")),
                     ("@CONF_FILE@", self.conf_path), ("@SYSCONFDIR@", self.dir)):
            snippet = snippet.replace(k, v)
        snippet = snippet.replace("unix:/run/fcgiwrap.socket", "unix:" + wrap)
        with open(os.path.join(self.dir, "nginx-sluice.conf"), "w") as f:
            f.write(snippet)
        shutil.copy("/etc/nginx/fastcgi_params", os.path.join(self.dir, "fastcgi_params"))
        conns = self.procs * self.peak_threads + 256
        with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
            f.write("%spid %s/nginx.pid;\nerror_log %s/nginx-error.log;\nworker_processes 2;\n"
                    "events { worker_connections %d; }\nhttp {\n access_log off;\n"
                    " types { text/html html; text/css css; text/javascript js; application/json json;"
                    " image/svg+xml svg; }\n default_type application/octet-stream;\n"
                    " client_body_temp_path %s/nginx-body;\n fastcgi_temp_path %s/nginx-fastcgi;\n"
                    " server {\n  listen 127.0.0.1:%d;\n  server_tokens off;\n  include %s/nginx-sluice.conf;\n"
                    " }\n}\n" % ("user root;\n" if os.geteuid() == 0 else "", self.dir, self.dir, conns * 2,
                                  self.dir, self.dir, self.port, self.dir))
        wait_for(lambda: os.path.exists(sock) and os.path.exists(wrap), 10, what="the pool's and fcgiwrap's sockets")
        self.proc = subprocess.Popen([NGINX, "-p", self.dir, "-c", os.path.join(self.dir, "nginx.conf"), "-g",
                                      "daemon off;"], stdout=out, stderr=out)
        self._wait_front("nginx")
        wait_for(lambda: len(self.responder_pids()) >= self.procs, 10, what="responders")
        return self

    def _start_apache(self):
        """Apache 2.4 in front: the pool under its own supervisor, conf/apache-sluice.conf.in
        inside a <VirtualHost> of a whole server. Apache will not serve as root: its children
        run as www-data then, so the state folder, a copy of the page and of the admin CGI,
        and the pool's socket are given to www-data (the responders, root, still reach them)."""
        import pwd
        sock = os.path.join(self.dir, "sluice-fcgi.sock")
        www, libexec = os.path.join(self.dir, "www"), os.path.join(self.dir, "libexec")
        shutil.copytree(os.path.join(SRCDIR, "www"), www)
        os.makedirs(libexec, exist_ok=True)
        cgi = os.path.join(libexec, "sluice-admin.cgi")
        shutil.copy(os.path.join(BUILDDIR, "admin", "sluice-admin.cgi"), cgi)
        with open(os.path.join(SRCDIR, "conf", "apache-sluice.conf.in")) as f:
            snippet = f.read()
        for k, v in (("@SOCKET@", sock), ("@WWW_DIR@", www), ("@ADMIN_CGI@", cgi), ("@PKGLIBEXECDIR@", libexec),
                     ("@CONF_FILE@", self.conf_path), ("@SYSCONFDIR@", self.dir)):
            snippet = snippet.replace(k, v)
        with open(os.path.join(self.dir, "apache-sluice.conf"), "w") as f:
            f.write(snippet)
        mods = ["mpm_event", "authz_core", "proxy", "proxy_fcgi", "mime", "alias", "cgid", "headers", "env", "dir"]
        user = ""
        if os.geteuid() == 0:
            user = "User www-data\nGroup www-data\n"
        with open(os.path.join(self.dir, "apache.conf"), "w") as f:
            f.write("ServerRoot %s\nServerName 127.0.0.1\nListen 127.0.0.1:%d\n%s%sPidFile %s/apache.pid\n"
                    "ErrorLog %s/apache-error.log\nMutex file:%s default\nScriptSock %s/cgid.sock\n"
                    "Timeout 3600\n%sAddType application/json .json\nAddType text/html .html\nAddType text/css .css\n"
                    "AddType text/javascript .js\nServerTokens Prod\n"
                    "<IfModule mpm_event_module>\n  ThreadsPerChild %d\n  MaxRequestWorkers %d\n"
                    "  ServerLimit 4\n  StartServers 2\n</IfModule>\n"
                    "<VirtualHost 127.0.0.1:%d>\n  Include %s/apache-sluice.conf\n</VirtualHost>\n" % (
                        self.dir, self.port, "".join("LoadModule %s_module %s/mod_%s.so\n" % (m, APACHE_MODULES, m)
                                                     for m in mods), user, self.dir, self.dir, self.dir, self.dir,
                        "TypesConfig /etc/mime.types\n" if os.path.exists("/etc/mime.types") else "",
                        64, 128, self.port, self.dir))
        env = dict(os.environ, SLUICE_CONF=self.conf_path)
        out = open(os.path.join(self.dir, "front.out"), "ab")
        self._start_pool(sock, out)
        wait_for(lambda: os.path.exists(sock), 10, what="the pool's socket")
        if os.geteuid() == 0:
            w = pwd.getpwnam("www-data")
            for root, dirs, files in os.walk(self.dir):
                for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                    os.lchown(n, w.pw_uid, w.pw_gid)
        self.proc = subprocess.Popen([APACHE, "-f", os.path.join(self.dir, "apache.conf"), "-DFOREGROUND"],
                                     env=env, stdout=out, stderr=out)
        self._wait_front("apache")
        wait_for(lambda: len(self.responder_pids()) >= self.procs, 10, what="responders")
        return self

    def _stop_nginx(self, sig):
        # SIGINT to lighttpd is its graceful stop; for nginx SIGQUIT is, and the pool's
        # supervisor drains on SIGTERM.
        for name, s in (("proc", signal.SIGQUIT if sig == signal.SIGINT else sig), ("sup", signal.SIGTERM),
                        ("wrap", signal.SIGTERM)):
            p = getattr(self, name, None)
            if p and p.poll() is None:
                p.send_signal(s)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            setattr(self, name, None)

    def responder_pids(self):
        sup = getattr(self, "sup", None)
        return [p for p in self._responder_pids() if not sup or p != sup.pid]

    def _responder_pids(self):
        pids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    args = f.read().split(b"\0")
                # Wrapped (SLUICE_FCGI_WRAP): the wrapper is argv[0], sluice-fcgi an argument.
                cmd = next((a for a in args if a.endswith(b"sluice-fcgi")), b"") if FCGI_WRAP else args[0]
                cmd = cmd.decode(errors="replace")
                with open("/proc/%s/environ" % pid, "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if cmd.endswith("sluice-fcgi") and ("SLUICE_CONF=" + self.conf_path).encode() in env:
                pids.append(int(pid))
        return sorted(pids)

    def stop(self, sig=signal.SIGINT):
        if FRONT in ("nginx", "apache"):
            self._stop_nginx(signal.SIGTERM if FRONT == "apache" else sig)
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        # Responders end on lighttpd's SIGTERM; make sure none of ours is left.
        deadline = time.time() + 15
        while self.responder_pids() and time.time() < deadline:
            time.sleep(0.1)
        for pid in self.responder_pids():
            os.kill(pid, signal.SIGKILL)

    def request(self, method, path, body=None, key=None, headers=None, timeout=30):
        hdrs = dict(headers or {})
        if key:
            hdrs["Authorization"] = "Bearer " + key
        return http_request(self.port, method, path, body, hdrs, timeout)

    def chat(self, key, model="m", content="hello", headers=None, **extra):
        body = {"model": model, "messages": [{"role": "user", "content": content}]}
        body.update(extra)
        return self.request("POST", "/v1/chat/completions", body, key=key, headers=headers)

    def stream_raw(self, key, body, headers=None, timeout=30):
        """Streams a POST; returns (status, headers, [(t, bytes)]) with arrival times."""
        hdrs = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
        hdrs.update(headers or {})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        t0 = time.time()
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(), headers=hdrs)
        resp = conn.getresponse()
        chunks = []
        while True:
            b = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
            if not b:
                break
            chunks.append((time.time() - t0, b))
        conn.close()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, chunks

    def usage_events(self, where="1=1", *params):
        if pg.enabled():
            return pg.execute(self.db, "SELECT * FROM usage_events WHERE " + where + " ORDER BY id", params,
                              dicts=True)
        con = sqlite3.connect(self.db, timeout=10)
        con.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in con.execute("SELECT * FROM usage_events WHERE " + where + " ORDER BY id", params)]
        finally:
            con.close()

    def log_text(self):
        try:
            with open(os.path.join(self.dir, "sluice-fcgi.log")) as f:
                return f.read()
        except OSError:
            return ""


class _WriteLock:
    def __init__(self, gw, exclusive):
        self.gw, self.exclusive, self.con = gw, exclusive, None

    def __enter__(self):
        if pg.enabled():
            self.con = pg.connect(self.gw.db)
            cur = self.con.cursor()
            cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
            tables = ", ".join('"%s"' % r[0] for r in cur.fetchall())
            cur.execute("LOCK TABLE %s IN EXCLUSIVE MODE" % tables)
        else:
            self.con = sqlite3.connect(self.gw.db, timeout=10, isolation_level=None)
            self.con.execute("BEGIN EXCLUSIVE" if self.exclusive else "BEGIN IMMEDIATE")
        return self

    def __exit__(self, *exc):
        try:
            self.con.rollback() if pg.enabled() else self.con.execute("ROLLBACK")
        finally:
            self.con.close()
        return False


def open_sealed(stored, key_text, aad):
    """R-SEC-9: opens a sealed upstream_auth independently of lib/secret.c, with libcrypto
    through ctypes: "enc1:" + base64(nonce[12] | ciphertext | tag[16]), AES-256-GCM under the
    key file's 32 bytes (raw, or 64 hex characters), additional data aad. A value without the
    prefix is returned as it is; None when it does not open."""
    import base64
    import binascii
    import ctypes
    import ctypes.util
    if not stored.startswith("enc1:"):
        return stored
    key = key_text if len(key_text) == 32 else bytes.fromhex(key_text.decode().strip())
    try:
        raw = base64.b64decode(stored[5:], validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) < 28:
        return None
    nonce, body, tag = raw[:12], raw[12:-16], raw[-16:]
    lib = ctypes.CDLL(ctypes.util.find_library("crypto") or "libcrypto.so.3")
    vp, ip = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)
    lib.EVP_CIPHER_CTX_new.restype = vp
    lib.EVP_aes_256_gcm.restype = vp
    lib.EVP_CIPHER_CTX_free.argtypes = [vp]
    lib.EVP_DecryptInit_ex.argtypes = [vp, vp, vp, ctypes.c_char_p, ctypes.c_char_p]
    lib.EVP_CIPHER_CTX_ctrl.argtypes = [vp, ctypes.c_int, ctypes.c_int, vp]
    lib.EVP_DecryptUpdate.argtypes = [vp, vp, ip, ctypes.c_char_p, ctypes.c_int]
    lib.EVP_DecryptFinal_ex.argtypes = [vp, vp, ip]
    ctx = lib.EVP_CIPHER_CTX_new()
    out = ctypes.create_string_buffer(len(body) + 32)
    n = ctypes.c_int(0)
    tagbuf = ctypes.create_string_buffer(tag, 16)
    try:
        ok = (lib.EVP_DecryptInit_ex(ctx, lib.EVP_aes_256_gcm(), None, None, None) == 1 and
              lib.EVP_CIPHER_CTX_ctrl(ctx, 0x9, 12, None) == 1 and          # EVP_CTRL_GCM_SET_IVLEN
              lib.EVP_DecryptInit_ex(ctx, None, None, key, nonce) == 1 and
              (not aad or lib.EVP_DecryptUpdate(ctx, None, ctypes.byref(n), aad.encode(), len(aad.encode())) == 1) and
              (not body or lib.EVP_DecryptUpdate(ctx, out, ctypes.byref(n), body, len(body)) == 1) and
              lib.EVP_CIPHER_CTX_ctrl(ctx, 0x11, 16, ctypes.cast(tagbuf, vp)) == 1 and  # EVP_CTRL_GCM_SET_TAG
              lib.EVP_DecryptFinal_ex(ctx, ctypes.cast(ctypes.byref(out, len(body)), vp), ctypes.byref(n)) == 1)
    finally:
        lib.EVP_CIPHER_CTX_free(ctx)
    return out.raw[:len(body)].decode() if ok else None


class ApiSession:
    """A caller of the management API with a login session (cookie + CSRF token)."""

    def __init__(self, gw, name, password):
        self.gw, self.name = gw, name
        r = gw.request("POST", "/api/v1/auth/login", {"username": name, "password": password})
        assert r.status == 200, (name, r)
        self.cookie = r.headers["set-cookie"].split(";")[0]
        self.csrf = r.json()["csrf_token"]
        self.user_id = r.json()["user"]["id"]

    def call(self, method, path, body=None):
        h = {"Cookie": self.cookie}
        if method != "GET":
            h["X-CSRF-Token"] = self.csrf
        return http_request(self.gw.port, method, path, body, h)

    def get(self, path):
        return self.call("GET", path)

    def post(self, path, body):
        return self.call("POST", path, body)

    def put(self, path, body):
        return self.call("PUT", path, body)

    def patch(self, path, body):
        return self.call("PATCH", path, body)

    def delete(self, path):
        return self.call("DELETE", path)


def expect(r, status, code=None, param=None):
    """An API answer of this status (and error code / param): its JSON body."""
    assert r.status == status, "expected %d%s, got %r" % (status, " " + code if code else "", r)
    body = r.json()
    if code:
        assert body["error"]["code"] == code, body
    if param:
        assert body["error"]["param"] == param, body
    return body


def ctl_fail(gw, *args):
    """sluicectl that must fail: (exit code, the JSON error, stderr)."""
    p = subprocess.run(gw.ctl_argv() + ["--json"] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode != 0, "sluicectl %s should have failed: %s" % (" ".join(map(str, args)), p.stdout)
    return p.returncode, json.loads(p.stdout)["error"] if p.stdout.strip() else None, p.stderr


def add_user_with_password(gw, name, tenant, role, password):
    p = subprocess.run(gw.ctl_argv() + ["--json", "user", "add", name, "--tenant", tenant, "--role", role,
                        "--password-stdin"], input=password + "\n", capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


def audit(gw, object_type, *where):
    """Audit rows of one object type (actor, action, object_id, tenant_id, before, after)."""
    q = "SELECT actor, action, object_id, tenant_id, before, after FROM audit_log WHERE object_type = ?"
    return gw.sql(q + "".join(" AND " + w for w in where) + " ORDER BY id", object_type)


def setup_tenant(gw, tenant="t1", user="u1", role="member"):
    """A tenant with one member key; returns the clear key."""
    gw.ctl("tenant", "add", tenant)
    gw.ctl("user", "add", user, "--tenant", tenant, "--role", role)
    return gw.ctl("key", "add", "--user", user)["key"]


class SingleSetup:
    """The most common fixture: one stand-in behind endpoint "ep" of tenant "acme", a member key
    (c.key), optionally a route for `model`, the gateway started. stop() ends both."""

    def __init__(self, name, fake_name, model="m", procs=1, threads=8, conf=None):
        self.fake = Fake(fake_name)
        self.gw = Gateway(name, procs=procs, threads=threads, conf=conf)
        self.key = setup_tenant(self.gw, "acme", "alice")
        add_endpoint(self.gw, "ep", "acme", [self.fake])
        if model:
            self.gw.ctl("route", "add", model, "ep", "--tenant", "acme")
        self.gw.start()

    def stop(self):
        self.gw.stop()
        self.fake.stop()


def stop_setup(c):
    if c:
        c.stop()


def add_endpoint(gw, name, tenant, fakes, algorithm="round_robin", **opts):
    extra = []
    for k, v in opts.items():
        extra += ["--" + k.replace("_", "-"), str(v)]
    ep = gw.ctl("endpoint", "add", name, "--tenant", tenant, "--algorithm", algorithm, *extra)
    for f in fakes:
        gw.ctl("replica", "add", name, f.url)
    return ep


class Ctx:
    """A test file's fixture: whatever its build(c) puts there."""


def setup_with(build, teardown):
    """The setup of a file with build(c) and teardown(c): build on a fresh Ctx; a build that
    fails is torn down first, so a failed setup leaves no process behind."""
    c = Ctx()
    try:
        return build(c)
    except BaseException:
        teardown(c)
        raise


def stop_all(c, *names):
    """A teardown: stops c's attributes named (gateways, stand-ins), in order, those the
    build got to (c may be None)."""
    if c:
        for name in names:
            p = getattr(c, name, None)
            if p:
                p.stop()


def run_tests(namespace, setup=None, teardown=None):
    """Runs every test_* function of a test file in order; prints one line each and the total."""
    os.makedirs(OUTDIR, exist_ok=True)
    tests = sorted((n, f) for n, f in namespace.items() if n.startswith("test_") and callable(f))
    tests.sort(key=lambda nf: nf[1].__code__.co_firstlineno)
    passed = failed = skipped = 0
    ctx = None
    try:
        ctx = setup() if setup else None
    except Exception:
        traceback.print_exc()
        print("not ok - setup of %s" % os.path.basename(sys.argv[0]))
        print("0 passed, %d failed" % max(1, len(tests)))
        sys.exit(1)
    try:
        for name, fn in tests:
            t0 = time.time()
            try:
                fn(ctx) if setup else fn()
                passed += 1
                print("ok - %s (%.2fs)" % (name, time.time() - t0), flush=True)
            except Skip as e:
                skipped += 1
                print("skip - %s: %s" % (name, e), flush=True)
            except Exception as e:
                failed += 1
                print("not ok - %s: %s" % (name, e), flush=True)
                traceback.print_exc(file=sys.stdout)
                if ctx is not None and hasattr(ctx, "gw"):
                    print("   logs: %s" % ctx.gw.dir)
    finally:
        if teardown:
            teardown(ctx)
    print("%d passed, %d failed%s" % (passed, failed, ", %d skipped" % skipped if skipped else ""))
    sys.exit(1 if failed else 0)


# ---- talking FastCGI to one responder process directly (bypassing the front server) ----

def fcgi_sockets(gw):
    """The per-process FastCGI sockets the front server made for gw's pool (sock-0, sock-1, ...)."""
    import glob
    return sorted(glob.glob(os.path.join(gw.dir, "sluice-fcgi.sock-*")),
                  key=lambda p: int(p.rsplit("-", 1)[1]))


def _fcgi_record(rtype, content, req_id=1):
    import struct
    out = b""
    for i in range(0, max(len(content), 1), 65535):
        part = content[i:i + 65535]
        pad = (8 - len(part) % 8) % 8
        out += struct.pack("!BBHHBB", 1, rtype, req_id, len(part), pad, 0) + part + b"\0" * pad
        if not content:
            break
    return out


def _fcgi_len(n):
    import struct
    return bytes([n]) if n < 128 else struct.pack("!I", n | 0x80000000)


def fcgi_request(sock_path, method, uri, body=None, headers=None, timeout=30, records=None):
    """One request straight to the responder listening on sock_path, as lighttpd would send it
    (REQUEST_URI, SCRIPT_NAME "", HTTP_* headers). Lets a test choose which process serves it.
    Returns a Response like http_request's; records (a list) gets the content of each
    FastCGI stdout record as it came (one per flush: a stream's write boundaries)."""
    import struct
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    body = body or b""
    path, _, query = uri.partition("?")
    params = {"REQUEST_METHOD": method, "REQUEST_URI": uri, "SCRIPT_NAME": "", "PATH_INFO": path,
              "QUERY_STRING": query, "SERVER_PROTOCOL": "HTTP/1.1", "GATEWAY_INTERFACE": "CGI/1.1",
              "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "1", "SERVER_ADDR": "127.0.0.1",
              "SERVER_PORT": "80", "SERVER_NAME": "127.0.0.1", "SERVER_SOFTWARE": "harness"}
    if body or method in ("POST", "PUT", "PATCH"):
        params["CONTENT_LENGTH"] = str(len(body))
    for k, v in (headers or {}).items():
        if k.lower() == "content-type":
            params["CONTENT_TYPE"] = v
        else:
            params["HTTP_" + k.upper().replace("-", "_")] = v
    if body and "CONTENT_TYPE" not in params:
        params["CONTENT_TYPE"] = "application/json"
    # surrogateescape: a test can send any byte ("\udcff" is the byte 0xff), as a front server may.
    enc = lambda t: t.encode("utf-8", "surrogateescape")
    pairs = b"".join(_fcgi_len(len(enc(k))) + _fcgi_len(len(enc(v))) + enc(k) + enc(v) for k, v in params.items())
    msg = (_fcgi_record(1, struct.pack("!HB5x", 1, 0)) + _fcgi_record(4, pairs) + _fcgi_record(4, b"") +
           (_fcgi_record(5, body) if body else b"") + _fcgi_record(5, b""))
    t0 = time.time()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        s.sendall(msg)
        data, out = b"", b""
        while True:
            while len(data) >= 8:
                _, rtype, _, clen, pad, _ = struct.unpack("!BBHHBB", data[:8])
                if len(data) < 8 + clen + pad:
                    break
                content, data = data[8:8 + clen], data[8 + clen + pad:]
                if rtype == 6:
                    out += content
                    if records is not None and content:
                        records.append(content)
                elif rtype == 3:
                    data = None
                    break
            if data is None:
                break
            b = s.recv(65536)
            if not b:
                break
            data += b
    finally:
        s.close()
    head, _, resp_body = out.partition(b"\r\n\r\n")
    hdrs, status = [], 200
    for line in head.decode(errors="replace").split("\r\n"):
        k, _, v = line.partition(":")
        if k.lower() == "status":
            status = int(v.strip().split()[0])
        elif k:
            hdrs.append((k, v.strip()))
    r = Response(status, {k.lower(): v for k, v in hdrs}, resp_body, time.time() - t0)
    r.header_list = hdrs
    return r
