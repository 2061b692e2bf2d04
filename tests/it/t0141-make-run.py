#!/usr/bin/env python3
"""t0141-make-run: `make run` (conf/run.sh) on any port from 1024 to 65535 (issue 13).

The demo upstream no longer sits at PORT+10000 (which does not exist above 55535): it takes
a free port and says which, or UPSTREAM_PORT; on a later start with another upstream port
the demo replica follows it (one replica, the new URL). A PORT outside 1024..65535 is
refused with a message; FRONT=nginx serves the same behind nginx. Ended by SIGTERM to
run.sh's PID, which stops what it started."""
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import pg
from harness import (BUILDDIR, CTL, LIGHTTPD, OUTDIR, SRCDIR, http_request, on_postgresql, port_is_free, run_tests,
                     wait_for)

STATE = os.path.join(OUTDIR, "t0141-%d" % os.getpid())


def high_free_port():
    """A free port above 55535, where PORT+10000 would not exist."""
    for _ in range(200):
        port = random.randint(55536, 65000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free high port")


def start(port, upstream_port=None, front="lighttpd"):
    args = ["sh", os.path.join(SRCDIR, "conf", "run.sh"), "--port", str(port), "--state", STATE, "--front", front,
            "--builddir", BUILDDIR, "--srcdir", SRCDIR, "--lighttpd", LIGHTTPD, "--procs", "1", "--threads", "8"]
    if upstream_port:
        args += ["--upstream-port", str(upstream_port)]
    out = open(os.path.join(OUTDIR, "t0141-run-%d.out" % port), "w+")
    p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    p.out = out
    return p


def banner(p):
    def ready():
        p.out.seek(0)
        text = p.out.read()
        return text if "Ctrl-C stops it." in text else None
    return wait_for(ready, 20, what="the make run banner")


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def chat(port):
    with open(os.path.join(STATE, "demo-key.txt")) as f:
        key = f.read().strip()
    return http_request(port, "POST", "/v1/chat/completions",
                        {"model": "demo", "messages": [{"role": "user", "content": "hi"}]},
                        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})


def replicas():
    p = subprocess.run([CTL, "--db", os.path.join(STATE, "sluice.db"), "--json", "list", "replicas", "--endpoint",
                        "demo-endpoint"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p
    return re.findall(r'"url":"([^"]*)"', p.stdout)


def test_a_high_port_then_another_upstream_port():
    shutil.rmtree(STATE, ignore_errors=True)
    port = high_free_port()
    p = start(port)
    try:
        text = banner(p)
        assert "sluice is serving on http://127.0.0.1:%d" % port in text, text
        m = re.search(r"demo upstream \(stand-in model server\): http://127.0.0.1:(\d+)", text)
        assert m, text
        first = int(m.group(1))
        r = chat(port)
        assert r.status == 200 and r.json()["choices"], r
        assert replicas() == ["http://127.0.0.1:%d" % first]
    finally:
        stop(p)
    # a replica the operator added to the demo endpoint is theirs: it stays
    own = "http://127.0.0.1:9/"
    subprocess.run([CTL, "--db", os.path.join(STATE, "sluice.db"), "replica", "add", "demo-endpoint", own],
                   check=True, capture_output=True, timeout=30)
    # the same state folder, a fixed upstream port: the demo replica follows it
    fixed = high_free_port()
    while fixed == first:
        fixed = high_free_port()
    p = start(port, fixed)
    try:
        text = banner(p)
        assert "demo upstream (stand-in model server): http://127.0.0.1:%d" % fixed in text, text
        assert chat(port).status == 200
        assert sorted(replicas()) == sorted(["http://127.0.0.1:%d" % fixed, own]), replicas()
    finally:
        stop(p)
    assert port_is_free(port), "everything it started has gone with it"


def behind(front, programs):
    """FRONT=nginx|apache: the same state folder served by that front in front of
    sluice-fcgi --listen (the management API through fcgiwrap or mod_cgid)."""
    if not all(shutil.which(p) or os.path.exists("/usr/sbin/" + p) for p in programs):
        print("   skipped: %s is not installed" % " or ".join(programs))
        return
    global STATE
    if front == "apache":
        # Apache's children (www-data, when root runs this) must reach the state folder:
        # one under /tmp, whatever folder the tests write to.
        STATE = os.path.join("/tmp", "sluice-t0141-apache-%d" % os.getpid())
        shutil.rmtree(STATE, ignore_errors=True)
    port = high_free_port()
    p = start(port, front=front)
    try:
        text = banner(p)
        assert "sluice is serving on http://127.0.0.1:%d behind %s" % (port, front) in text, text
        r = chat(port)
        assert r.status == 200 and r.json()["choices"], r
        pw = open(os.path.join(STATE, "admin-password.txt")).read().strip()
        r = http_request(port, "POST", "/api/v1/auth/login", {"username": "admin", "password": pw})
        assert r.status == 200 and r.json()["user"]["role"] == "operator", r
        r = http_request(port, "GET", "/inference/")
        assert r.status == 200 and "content-security-policy" in r.headers, r
    finally:
        stop(p)
    assert port_is_free(port), "everything it started has gone with it"
    assert not os.path.exists(os.path.join(STATE, "sluice-fcgi.sock")), "the pool's socket is gone with it"
    if front == "apache":
        shutil.rmtree(STATE, ignore_errors=True)


def test_behind_nginx():
    behind("nginx", ("nginx", "fcgiwrap"))


def test_behind_apache():
    behind("apache", ("apache2",))


def test_make_run_database_and_state():
    """make run DATABASE=... STATE=...: the generated sluice.conf's database and state lines
    (issue 19); sluicectl and the pool use that database, nothing is made at STATE_DIR/sluice.db.
    On PostgreSQL (SLUICE_TEST_DATABASE=postgresql) DATABASE is a database of the test's server."""
    state = os.path.join(OUTDIR, "t0141-db-%d" % os.getpid())
    shutil.rmtree(state, ignore_errors=True)
    if on_postgresql():
        database = pg.server(OUTDIR).create_database("t0141")
    else:
        other = os.path.join(OUTDIR, "t0141-elsewhere-%d" % os.getpid())
        shutil.rmtree(other, ignore_errors=True)
        os.makedirs(other, mode=0o750)
        database = os.path.join(other, "elsewhere.db")
    # A Redis nobody listens on: keys without limits never wait for it (fail_open).
    kv = "redis+unix://%s/no-redis.sock?db=3" % state
    port = high_free_port()
    out = open(os.path.join(OUTDIR, "t0141-make-run-%d.out" % port), "w+")
    p = subprocess.Popen(["make", "-s", "-C", BUILDDIR, "run", "PORT=%d" % port, "STATE_DIR=" + state,
                          "DATABASE=" + database, "STATE=" + kv, "LIGHTTPD=" + LIGHTTPD],
                         stdout=out, stderr=subprocess.STDOUT)
    p.out = out
    try:
        banner(p)
        with open(os.path.join(state, "sluice.conf")) as f:
            lines = f.read().split("\n")
        assert 'database = "%s";' % database in lines, [l for l in lines if l.startswith("database")]
        assert 'state = "%s";' % kv in lines, [l for l in lines if l.startswith("state")]
        key = open(os.path.join(state, "demo-key.txt")).read().strip()
        r = http_request(port, "POST", "/v1/chat/completions",
                         {"model": "demo", "messages": [{"role": "user", "content": "hi"}]},
                         headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        assert r.status == 200 and r.json()["choices"], r
        assert not os.path.exists(os.path.join(state, "sluice.db")), "the database is DATABASE, not STATE_DIR's"
        if on_postgresql():
            tenants = pg.execute(database, "SELECT name FROM tenants WHERE name = 'demo'", ())
            assert tenants == [("demo",)], tenants
            assert 'secrets: { key_file = "%s/sluice.key"; };' % state in lines, "a URL keeps its key in STATE_DIR"
        else:
            assert os.path.exists(database), "sluicectl init made DATABASE"
    finally:
        stop(p)
        wait_for(lambda: port_is_free(port), 15, what="make run's processes gone")


def test_a_port_out_of_range_is_refused():
    for bad in ("80", "70000", "many"):
        p = subprocess.run(["sh", os.path.join(SRCDIR, "conf", "run.sh"), "--port", bad, "--state", STATE + "-bad",
                            "--builddir", BUILDDIR, "--srcdir", SRCDIR], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "PORT must be" in p.stderr, (bad, p)
    assert not os.path.exists(STATE + "-bad")


run_tests(globals())
