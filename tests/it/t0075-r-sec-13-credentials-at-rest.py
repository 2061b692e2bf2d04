#!/usr/bin/env python3
"""t0075-r-sec-13-credentials-at-rest: the database is no longer world-readable and a copy of it
alone reveals no upstream credential (SPEC R-SEC-9; hardening item R-SEC-13).

Rule: the state folder is 0750 and the database (with its -wal and -shm) 0640; upstream
credentials are stored sealed, "enc1:" + base64(nonce | AES-256-GCM ciphertext | tag), with
the key in a file outside the database (secrets.key_file, by default sluice.key beside the
database; mode 0600, created by `sluicectl init` or the first credential stored). Everything
that sends a credential (data plane, healthd's business probe, the endpoint test) opens it;
a value that cannot be opened is logged (naming the endpoint, never the value) and not sent.
A legacy clear value still works and `sluicectl init` seals it (idempotent).

The database files are read raw and searched for the credential's bytes; what the stand-in
upstream received is read from GET /_fake/stats ("last" with its headers)."""
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (CTL, OUTDIR, Fake, Gateway, Healthd, open_sealed, run_tests, setup_tenant, setup_with,
                     skip_on_postgresql, sqlite_only, stop_all, wait_for)

SECRET = "sk-t0075-openai-%d-Zq8Rw2Lp" % os.getpid()
SECRET_ANT = "sk-ant-t0075-%d-Hx4Tn7Ke" % os.getpid()
LEGACY = "sk-t0075-legacy-clear-%d-Mv5Yc1" % os.getpid()
FRESH = "sk-t0075-fresh-%d-Pu6Gd3" % os.getpid()


def ctl(*args, check=True):
    p = subprocess.run([CTL, "--json"] + [str(a) for a in args], capture_output=True, text=True, timeout=30)
    if check:
        assert p.returncode == 0, "sluicectl %r failed: %s %s" % (args, p.stdout, p.stderr)
    return p


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def db_files(db):
    return [p for p in (db, db + "-wal", db + "-shm") if os.path.exists(p)]


def leaks(db, *secrets):
    """(file, secret) for every database file holding a secret's bytes (also UTF-16, hex)."""
    found = []
    for p in db_files(db):
        with open(p, "rb") as f:
            data = f.read()
        for s in secrets:
            for form in (s.encode(), s.encode("utf-16-le"), s.encode().hex().encode()):
                if form in data:
                    found.append((os.path.basename(p), s))
    return found


def auth_seen(fake):
    last = fake.stats()["last"]
    if not last:
        return None
    h = last["headers"]
    return (h.get("authorization"), h.get("x-api-key"))


def setup():
    return setup_with(build, teardown)


def build(c):
    c.up = Fake("t0075")
    c.gw = gw = Gateway("t0075", procs=1, threads=8)       # runs `sluicectl init`
    c.key = setup_tenant(gw, "acme", "alice")
    gw.ctl_secret(SECRET, "endpoint", "add", "ep-oa", "--tenant", "acme", "--business-probe-rounds", "1")
    gw.ctl("replica", "add", "ep-oa", c.up.url)
    gw.ctl("route", "add", "m", "ep-oa", "--tenant", "acme")
    gw.ctl_secret(SECRET_ANT, "endpoint", "add", "ep-ant", "--tenant", "acme", "--protocol", "anthropic",
                  "--health-check", "0")
    gw.ctl("replica", "add", "ep-ant", c.up.url, "--engine", "anthropic")
    gw.ctl("route", "add", "ma", "ep-ant", "--tenant", "acme")
    c.ep = {n: gw.sql("SELECT id FROM endpoints WHERE name = ?", n)[0][0] for n in ("ep-oa", "ep-ant")}
    gw.start()
    return c


def teardown(c):
    stop_all(c, "copy", "gw", "up")


def test_modes_of_the_state_folder_database_and_key_file(c):
    gw = c.gw
    assert os.path.exists(gw.key_file), "no key file %s after sluicectl init" % gw.key_file
    assert mode(gw.key_file) == 0o600, "key file mode %o" % mode(gw.key_file)
    assert os.path.getsize(gw.key_file) == 65, os.path.getsize(gw.key_file)   # 64 hex characters + newline
    assert mode(gw.dir) == 0o750, "state folder mode %o" % mode(gw.dir)
    assert gw.chat(c.key, model="m").status == 200      # the pool has the database open ...
    sqlite = sqlite_only("modes of the database file and its -wal and -shm")
    if sqlite:
        wait_for(lambda: len(db_files(gw.db)) == 3, 5, what="-wal and -shm")   # ... so -wal/-shm exist
        for p in db_files(gw.db):
            assert mode(p) == 0o640, "%s has mode %o, not 0640" % (p, mode(p))
    got = gw.ctl("init")                                 # says where the key is; changes nothing
    assert got["key_file"] == gw.key_file and got["credentials_sealed"] == 0, got
    if sqlite:
        assert [mode(p) for p in db_files(gw.db)] == [0o640] * len(db_files(gw.db))


def test_a_new_database_is_created_0640(c):
    d = os.path.join(OUTDIR, "t0075-new-%d" % os.getpid())
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    old = os.umask(0o022)
    try:
        ctl("--db", os.path.join(d, "x.db"), "tenant", "add", "nope", check=False)   # no init: not created
        assert not os.path.exists(os.path.join(d, "x.db"))
        got = json.loads(ctl("--db", os.path.join(d, "x.db"), "init").stdout)
    finally:
        os.umask(old)
    assert mode(os.path.join(d, "x.db")) == 0o640, mode(os.path.join(d, "x.db"))
    assert got["key_file"] == os.path.join(d, "sluice.key") and mode(got["key_file"]) == 0o600, got
    # --key-file puts the key elsewhere.
    other = os.path.join(d, "elsewhere.key")
    got = json.loads(ctl("--db", os.path.join(d, "y.db"), "--key-file", other, "init").stdout)
    assert got["key_file"] == other and mode(other) == 0o600, got
    shutil.rmtree(d, ignore_errors=True)


def test_credentials_are_stored_sealed_and_nowhere_in_clear(c):
    gw = c.gw
    for name, secret in (("ep-oa", SECRET), ("ep-ant", SECRET_ANT)):
        stored = gw.sql("SELECT upstream_auth FROM endpoints WHERE id = ?", c.ep[name])[0][0]
        assert stored.startswith("enc1:") and secret not in stored, stored
        # The documented format, opened independently of lib/secret.c (libcrypto via ctypes) ...
        with open(gw.key_file, "rb") as f:
            key = f.read()
        assert open_sealed(stored, key, "endpoint:%d" % c.ep[name]) == secret
        # ... and bound to its row: copied onto another endpoint it does not open.
        other = c.ep["ep-ant" if name == "ep-oa" else "ep-oa"]
        assert open_sealed(stored, key, "endpoint:%d" % other) is None
    assert gw.upstream_auth(c.ep["ep-oa"]) == SECRET
    # Some traffic first, so the WAL holds recent pages too.
    assert gw.chat(c.key, model="m").status == 200
    if sqlite_only("the bytes of the database file and its WAL searched for the credentials"):
        found = leaks(gw.db, SECRET, SECRET_ANT)
        assert not found, "R-SEC-9: a credential is in clear in %r" % found


def test_the_data_plane_sends_the_opened_credential(c):
    time.sleep(0.6)
    c.up.reset()
    r = c.gw.chat(c.key, model="m", content="openai")
    assert r.status == 200, r
    assert auth_seen(c.up) == ("Bearer " + SECRET, None), c.up.stats()["last"]
    c.up.reset()
    r = c.gw.chat(c.key, model="ma", content="anthropic")
    assert r.status == 200, r
    assert auth_seen(c.up) == (None, SECRET_ANT), c.up.stats()["last"]


def test_the_endpoint_test_sends_it(c):
    c.up.reset()
    got = c.gw.ctl("endpoint", "test", "ep-oa")
    assert got["ok"] is True, got
    assert auth_seen(c.up) == ("Bearer " + SECRET, None), c.up.stats()["last"]
    assert SECRET not in json.dumps(got)
    # With another key (--key-file) it does not open: the test says so and sends nothing.
    wrong = os.path.join(c.gw.dir, "wrong.key")
    with open(wrong, "w") as f:
        f.write("ab" * 32 + "\n")
    os.chmod(wrong, 0o600)
    c.up.reset()
    p = ctl("--db", c.gw.db, "--key-file", wrong, "endpoint", "test", "ep-oa")
    got = json.loads(p.stdout)
    assert got["ok"] is False and "cannot be opened" in got["error"], got
    assert c.up.stats()["requests"] == 0, c.up.stats()
    assert SECRET not in p.stdout + p.stderr


def test_healthd_business_probe_sends_it(c):
    c.up.reset()
    hd = Healthd(c.gw)
    try:
        def probed():
            last = c.up.stats()["last"]
            return last and last.get("body") and json.loads(last["body"]).get("max_tokens") == 1
        wait_for(probed, 10, what="healthd's business probe")
        assert auth_seen(c.up) == ("Bearer " + SECRET, None), c.up.stats()["last"]
    finally:
        hd.stop()
    assert SECRET not in hd.log_text()


def test_a_copy_of_the_database_without_the_key_reveals_nothing(c):
    """Another gateway loads a copy of the database with no key beside it: no credential is
    sent, the log names the endpoints and not the value; the first credential stored there
    makes a key file of its own."""
    skip_on_postgresql("the copy is an sqlite3 backup of the database file")
    c.copy = cp = Gateway("t0075-copy", procs=1, threads=8)
    os.unlink(cp.key_file)                              # the copy's own init made one
    for p in db_files(cp.db):
        os.unlink(p)
    src, dst = sqlite3.connect(c.gw.db), sqlite3.connect(cp.db)
    src.backup(dst)
    src.close()
    dst.close()
    os.chmod(cp.db, 0o640)
    found = leaks(cp.db, SECRET, SECRET_ANT)
    assert not found, "R-SEC-9: the copy holds a credential in clear: %r" % found
    cp.start()
    time.sleep(0.5)
    c.up.reset()
    for model in ("m", "ma"):
        r = cp.chat(c.key, model=model, content="copy")
        # The stand-in's Messages API wants an x-api-key: the anthropic endpoint fails upstream.
        assert r.status == 200 if model == "m" else r.status >= 400, r
        assert auth_seen(c.up) == (None, None), "a copy without the key sent a credential: %r" % (c.up.stats()["last"],)
        assert SECRET not in r.body.decode(errors="replace") and SECRET_ANT not in r.body.decode(errors="replace")
    log = cp.log_text()
    assert "endpoint ep-oa" in log and "cannot be opened" in log, log[-2000:]
    assert SECRET not in log and SECRET_ANT not in log
    assert not os.path.exists(cp.key_file), "a reader created a key file"
    # A credential stored on the copy makes a new key there (0600) and is sent.
    cp.ctl_secret(FRESH, "endpoint", "set", "ep-oa")
    assert os.path.exists(cp.key_file) and mode(cp.key_file) == 0o600
    assert cp.upstream_auth(c.ep["ep-oa"]) == FRESH
    time.sleep(1.0)
    c.up.reset()
    assert cp.chat(c.key, model="m", content="fresh").status == 200
    assert auth_seen(c.up) == ("Bearer " + FRESH, None), c.up.stats()["last"]
    cp.stop()
    c.copy = None


def test_a_legacy_clear_value_works_and_init_seals_it(c):
    gw = c.gw
    # written around sluicectl, as before sealing existed
    gw.sql_write("UPDATE endpoints SET upstream_auth = ? WHERE id = ?", LEGACY, c.ep["ep-oa"])
    assert gw.sql("SELECT upstream_auth FROM endpoints WHERE id = ?", c.ep["ep-oa"]) == [(LEGACY,)]
    time.sleep(1.0)
    c.up.reset()
    assert gw.chat(c.key, model="m", content="legacy").status == 200
    assert auth_seen(c.up) == ("Bearer " + LEGACY, None), c.up.stats()["last"]
    got = gw.ctl("init")
    assert got["credentials_sealed"] == 1, got
    assert gw.upstream_auth(c.ep["ep-oa"]) == LEGACY       # sealed now, and opens to the same value
    assert gw.upstream_auth(c.ep["ep-ant"]) == SECRET_ANT  # already sealed: untouched
    if sqlite_only("the bytes of the database file searched for the legacy value"):
        found = leaks(gw.db, LEGACY)
        assert not found, "the sealed legacy value is still in clear in %r" % found
    audit = gw.sql("SELECT COUNT(*) FROM audit_log WHERE action = 'seal' AND object_id = ?", c.ep["ep-oa"])
    assert audit == [(1,)], audit
    stored = gw.sql("SELECT upstream_auth FROM endpoints WHERE id = ?", c.ep["ep-oa"])
    assert gw.ctl("init")["credentials_sealed"] == 0                     # idempotent
    assert gw.sql("SELECT upstream_auth FROM endpoints WHERE id = ?", c.ep["ep-oa"]) == stored
    time.sleep(1.0)
    c.up.reset()
    assert gw.chat(c.key, model="m", content="resealed").status == 200
    assert auth_seen(c.up) == ("Bearer " + LEGACY, None), c.up.stats()["last"]


def test_zz_no_credential_in_any_file_but_through_the_key(c):
    """Nothing the gateway wrote holds a credential in clear: logs, state, database."""
    hits = []
    for root, _, files in os.walk(c.gw.dir):
        for name in files:
            if ".sock" in name:
                continue
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            for s in (SECRET, SECRET_ANT, LEGACY):
                if s.encode() in data:
                    hits.append((name, s))
    assert not hits, "a credential is written in clear in %r" % hits


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
