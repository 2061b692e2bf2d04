#!/usr/bin/env python3
"""t0140-config: sluice.conf says what is wrong, and a database from a newer sluice is refused
(issue 13: configuration and operations; R-DEP-5).

`sluice-fcgi --check-config -c FILE` and `sluice-healthd --check-config -c FILE` print
"configuration OK" (exit 0) or every mistake as FILE:LINE: naming the option (exit 1): an
unknown option (with the nearest known name), a wrong type, a value out of range. A refused
file is not used: the responder and healthd do not start on it. A relative path in the file
is read against the file's folder. A database whose schema is newer than the binaries is
refused by sluicectl, healthd and the responder with a message that says so, unchanged."""
import os
import shutil
import signal
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (CTL, FCGI, HEALTHD, OUTDIR, Fake, Gateway, add_endpoint, run_tests, setup_tenant, setup_with,
                     skip_on_postgresql, stop_all, wait_for)


def build(c):
    c.dir = os.path.join(OUTDIR, "t0140-%d" % os.getpid())
    shutil.rmtree(c.dir, ignore_errors=True)
    os.makedirs(c.dir)
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def write(c, name, text):
    path = os.path.join(c.dir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def run(*args, cwd=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=30, cwd=cwd)


def test_the_generated_configuration_is_ok(c):
    gw = Gateway("t0140ok", procs=1, threads=4)
    for prog in (FCGI, HEALTHD):
        p = run(prog, "--check-config", "-c", gw.conf_path)
        assert p.returncode == 0 and p.stdout.strip() == "configuration OK", (prog, p)


BAD = """database = "x.db";
pool: { processes = 2; threads = "many"; };
passive: { ban_msx = 2000; };
limits: { max_body_bytes = 12; };
colour = "blue";
stream: { keepalive_ms = 2.5; };
"""


def test_every_mistake_named_with_its_line(c):
    path = write(c, "bad.conf", BAD)
    for prog in (FCGI, HEALTHD):
        p = run(prog, "--check-config", "-c", path)
        assert p.returncode == 1 and "configuration OK" not in p.stdout, (prog, p)
        for want in ("%s:2: pool.threads must be an integer, not a string" % path,
                     "%s:3: unknown option passive.ban_msx (did you mean passive.ban_ms?)" % path,
                     "%s:4: limits.max_body_bytes = 12 is outside 1024..4294967296" % path,
                     "%s:5: unknown option colour" % path,
                     "%s:6: stream.keepalive_ms must be an integer, not a number with a fraction" % path):
            assert want in p.stderr, (prog, want, p.stderr)


def test_a_refused_file_is_not_used(c):
    """Without --check-config the programs stop on it (nothing half-read), healthd before a round."""
    path = write(c, "typo.conf", 'database = "%s/t.db";\nhealth: { round_msx = 100; };\n' % c.dir)
    p = run(HEALTHD, "-c", path, "--rounds", "1")
    assert p.returncode != 0 and "unknown option health.round_msx (did you mean health.round_ms?)" in p.stderr, p
    assert not os.path.exists(os.path.join(c.dir, "t.db")), "healthd used the refused file"
    p = run(FCGI, "-c", path)
    assert p.returncode == 1 and "health.round_msx" in p.stderr, p


def test_relative_paths_beside_the_file(c):
    """healthd run from another folder finds the database the file names relatively."""
    sub = os.path.join(c.dir, "etc")
    os.makedirs(sub, exist_ok=True)
    db = os.path.join(sub, "rel.db")
    p = run(CTL, "--db", db, "init")
    assert p.returncode == 0, p
    path = write(c, "etc/rel.conf", 'database = "rel.db";\nstate_file = "rel.state";\nlog_file = "-";\n'
                                    'secrets: { key_file = "sluice.key"; };\n')
    p = run(HEALTHD, "-c", path, "--rounds", "1", cwd="/")
    assert p.returncode == 0, p
    assert os.path.exists(os.path.join(sub, "rel.state")), os.listdir(sub)
    assert not os.path.exists("/rel.state")


def test_a_newer_schema_is_refused(c):
    skip_on_postgresql("the schema version is the file's PRAGMA user_version")
    gw = Gateway("t0140new", procs=1, threads=4)
    con = sqlite3.connect(gw.db)
    have = con.execute("PRAGMA user_version").fetchone()[0]
    n_before = con.execute("SELECT count(*) FROM tenants").fetchone()[0]
    con.execute("PRAGMA user_version = %d" % (have + 1))
    con.commit()
    con.close()
    want = "has schema version %d, newer than this sluice knows (%d)" % (have + 1, have)
    p = run(CTL, "--db", gw.db, "list", "tenants")
    assert p.returncode != 0 and want in p.stderr, p
    p = run(HEALTHD, "-c", gw.conf_path, "--rounds", "1")
    assert p.returncode != 0, p
    log = os.path.join(gw.dir, "sluice-healthd.log")           # health.log_file of the generated file
    logged = open(log).read() if os.path.exists(log) else ""
    assert want in p.stderr + logged, (p, logged)
    # nothing was migrated or written
    con = sqlite3.connect(gw.db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == have + 1
    assert con.execute("SELECT count(*) FROM tenants").fetchone()[0] == n_before
    con.close()


def test_sighup_rereads_what_can_change_live(c):
    """SIGHUP: a live option (limits.max_body_bytes) holds at once, a moved access log is
    written at its new path, an option read at start (pool.threads) is logged as needing a
    restart; a file with a mistake is refused and the running configuration stays."""
    c.gw = gw = Gateway("t0140hup", procs=2, threads=4)
    key = setup_tenant(gw, "acme", "alice")
    fake = Fake("t0140")
    c.fake = fake
    add_endpoint(gw, "ep", "acme", [fake])
    gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    gw.start()
    wait_for(lambda: gw.chat(key).status == 200, 5, what="key live")
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 6000}]}
    assert gw.request("POST", "/v1/chat/completions", big, key=key).status == 200
    with open(gw.conf_path) as f:
        text = f.read()
    moved = os.path.join(gw.dir, "access-moved.log")
    new = (text.replace("max_body_bytes = 8388608;", "max_body_bytes = 4096;")
           .replace("threads = 4;", "threads = 8;")
           .replace('access_log = "%s/access.log";' % gw.dir, 'access_log = "%s";' % moved))
    assert new.count("4096") >= 1 and moved in new and "threads = 8;" in new, new
    with open(gw.conf_path, "w") as f:
        f.write(new)
    pids = gw.responder_pids()
    before = gw.log_text().count("SIGHUP: configuration re-read")
    for pid in pids:
        os.kill(pid, signal.SIGHUP)
    wait_for(lambda: gw.log_text().count("SIGHUP: configuration re-read") >= before + len(pids), 5,
             what="every responder re-read")
    log = gw.log_text()
    assert "SIGHUP: limits.max_body_bytes 8388608 -> 4096" in log, log[-3000:]
    assert "SIGHUP: pool.threads 4 -> 8 needs a restart" in log, log[-3000:]
    assert "SIGHUP: access_log" in log, log[-3000:]
    assert gw.responder_pids() == pids, "SIGHUP must not end a responder"
    for i in range(4):                  # every responder: the new limit
        r = gw.request("POST", "/v1/chat/completions", big, key=key)
        assert r.status == 413, r
    r = gw.request("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                   key=key, headers={"X-Request-Id": "t0140-moved"})
    assert r.status == 200, r
    wait_for(lambda: os.path.exists(moved) and "t0140-moved" in open(moved).read(), 5, what="the moved access log")
    # a mistake: refused, the running configuration (4096) stays
    with open(gw.conf_path, "w") as f:
        f.write(new.replace("max_body_bytes = 4096;", "max_body_bytes = 4096; max_bodyy = 1;"))
    before = gw.log_text().count("SIGHUP: configuration re-read")
    for pid in pids:
        os.kill(pid, signal.SIGHUP)
    wait_for(lambda: gw.log_text().count("SIGHUP: configuration re-read") >= before + len(pids), 5,
             what="every responder re-read")
    assert "refused" in gw.log_text(), gw.log_text()[-2000:]
    assert gw.request("POST", "/v1/chat/completions", big, key=key).status == 413


run_tests(globals(), setup, teardown)
