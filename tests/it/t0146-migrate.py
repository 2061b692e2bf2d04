#!/usr/bin/env python3
"""t0146-migrate: a database of the first released schema upgrades in place (issue 13).

tests/fixtures/sluice-schema1.sql holds rows in every table of sql/001_init.sql, as a v1
sluice wrote them. Loaded into a fresh file at user_version 1, it is opened by today's
sluicectl (which runs every migration in one transaction): the schema reaches the newest
version, every row of every v1 table keeps every v1 column's value, and the upgraded
database serves: the v1 member key authenticates and its limits hold as written, its route
and target model answer, the revoked key stays revoked, the old usage rows are still in
the usage report."""
import os
import shutil
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import CTL, OUTDIR, SRCDIR, Fake, Gateway, run_tests, setup_with, skip_on_postgresql, stop_all, wait_for

KEY = "sk-tenant-fixtureschema1keyAAAAAAAAAAAAAAAAAAAAAA"
V1_TABLES = ("tenants", "users", "endpoints", "replicas", "routes", "api_keys", "settings", "usage_events",
             "usage_daily", "config_version")


def v1_database(path):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    con = sqlite3.connect(path)
    with open(os.path.join(SRCDIR, "sql", "001_init.sql")) as f:
        con.executescript(f.read())
    with open(os.path.join(SRCDIR, "tests", "fixtures", "sluice-schema1.sql")) as f:
        con.executescript(f.read())
    con.execute("PRAGMA user_version = 1")
    con.commit()
    return con


def rows(con, table, columns):
    order = "day, tenant_id, user_id, key_id, model" if table == "usage_daily" else \
        "key" if table == "settings" else "id"
    return con.execute("SELECT %s FROM %s ORDER BY %s" % (", ".join(columns), table, order)).fetchall()


def build(c):
    c.dir = os.path.join(OUTDIR, "t0146-fixture-%d" % os.getpid())
    shutil.rmtree(c.dir, ignore_errors=True)
    os.makedirs(c.dir)
    c.db = os.path.join(c.dir, "v1.db")
    con = v1_database(c.db)
    c.columns = {t: [r[1] for r in con.execute("PRAGMA table_info(%s)" % t)] for t in V1_TABLES}
    c.before = {t: rows(con, t, c.columns[t]) for t in V1_TABLES}
    con.close()
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def test_every_v1_row_survives_the_upgrade(c):
    assert all(c.before[t] for t in V1_TABLES), "the fixture fills every table"
    p = subprocess.run([CTL, "--db", c.db, "list", "tenants"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p
    con = sqlite3.connect(c.db)
    newest = max(int(f.split("_", 1)[0]) for f in os.listdir(os.path.join(SRCDIR, "sql")) if f.endswith(".sql"))
    assert con.execute("PRAGMA user_version").fetchone()[0] == newest
    for t in V1_TABLES:
        if t == "config_version":
            continue                    # it counts changes; migrations may add to it
        after = rows(con, t, c.columns[t])
        assert after == c.before[t], "table %s changed:\n  before %r\n  after  %r" % (t, c.before[t], after)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    con.close()


def test_the_upgraded_database_serves(c):
    skip_on_postgresql("the upgraded v1 file is copied over the gateway's database file")
    c.fake = Fake("migrate")
    c.gw = gw = Gateway("t0146", procs=1, threads=4)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(gw.db + suffix):
            os.remove(gw.db + suffix)
    shutil.copy(c.db, gw.db)
    os.chmod(gw.db, 0o640)
    gw.sql_write("UPDATE replicas SET url = ?, state = 'running', healthy = 1 WHERE id = 1", c.fake.url)
    gw.sql_write("UPDATE replicas SET state = 'disabled' WHERE id = 2")
    gw.start()
    body = {"model": "llama", "messages": [{"role": "user", "content": "hi"}]}
    r = wait_for(lambda: (lambda r: r if r.status == 200 else None)(
        gw.request("POST", "/v1/chat/completions", body, key=KEY)), 5, what="the v1 key served")
    assert c.fake.stats()["last"]["body"].find("meta-llama/Llama-3.1-8B-Instruct") >= 0, c.fake.stats()["last"]
    r = gw.request("POST", "/v1/chat/completions", body, key="sk-tenant-revoked")
    assert r.status == 401, r
    keys = gw.ctl("list", "keys", "--tenant", "acme")["keys"]
    k = [k for k in keys if k["name"] == "alice-laptop"][0]
    assert (k["qps_limit"], k["daily_limit"], k["monthly_token_quota"]) == (10, 1000, 1000000), k
    n = gw.sql("SELECT count(*) FROM usage_events WHERE request_id LIKE 'req-fixture-%'")[0][0]
    assert n == 3


run_tests(globals(), setup, teardown)
