#!/usr/bin/env python3
"""t0074-r-sec-3-passthrough-escapes: the pass-through never lets an escape reach the replica
that a path-normalising server would turn into a way out of the path (double encoding %252e,
..%3f, encoded slashes, dots, ? and #): such paths are 400 invalid_path and reach nobody; every
path that is let through stays under the replica's root even after repeated decoding and
normalisation, as a normalising upstream would do (R-SEC-3)."""
import os
import posixpath
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import SingleSetup, run_tests, stop_setup

REFUSED = ["/v1/%252e%252e/secret", "/%252e%252e%252fetc/passwd", "/v1/..%3f/x", "/v1/a%3fb", "/v1/a%23b",
           "/v1%2Fmodels", "/x/.%2e/y", "/%2e%2e/x", "/v1/../x", "/v1/%5c..%5cx", "/a/%2e"]
PASSED = ["/v1/models", "/v1/files/file-abc%3Ax", "/a%20b/c", "/v1/x?q=%252e%252e", "/.well-known/x",
          "/v1/caf%C3%A9"]


def setup():
    return SingleSetup("t0074", "esc", model=None)


def normalised(path):
    """What a server that decodes until nothing changes and resolves dot segments makes of it."""
    p = path.split("?", 1)[0]
    for _ in range(5):
        q = urllib.parse.unquote(p)
        if q == p:
            break
        p = q
    return posixpath.normpath(p.replace("\\", "/"))


def test_dangerous_escapes_are_refused_R_SEC_3(c):
    n = c.fake.stats()["requests"]
    for path in REFUSED:
        r = c.gw.request("GET", "/api/v1/proxy/ep" + path, key=c.key)
        assert r.status == 400, (path, r)
        if r.headers.get("content-type", "").startswith("application/json"):
            assert r.json()["error"]["code"] == "invalid_path", (path, r)
    assert c.fake.stats()["requests"] == n, "a refused path reached the replica"


def test_what_passes_stays_under_the_root_R_SEC_3(c):
    for path in PASSED:
        r = c.gw.request("GET", "/api/v1/proxy/ep" + path, key=c.key)
        assert r.status != 400, (path, r)
        last = c.fake.stats()["last"]
        got = last["path"] + ("?" + last["query"] if last.get("query") else "")
        assert got == path, (path, got)               # as written, not decoded by sluice
        n = normalised(got)
        assert n.startswith("/") and "/../" not in n + "/" and not n.startswith("/.."), (path, n)


if __name__ == "__main__":
    run_tests(globals(), setup, stop_setup)
