#!/usr/bin/env python3
"""t0071-r-sec-4-input-hygiene: strings sluice interprets hold no control characters, bodies
are valid UTF-8 JSON, and everything sluice writes into JSON is valid UTF-8 (R-SEC-4, R-API-3)."""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fake = Fake("hyg")
    c.gw = Gateway("t0071", procs=1, threads=8)
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "demo", "ep", "--tenant", "acme")
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()


def upstream_requests(c):
    return c.fake.stats()["requests"]


def refused(c, r, code, param):
    assert r.status == 400, r
    body = r.body.decode("utf-8")            # strict: invalid UTF-8 raises
    e = json.loads(body)["error"]
    assert e["code"] == code and e["param"] == param, e


def test_nul_in_model_is_refused_not_routed_R_SEC_4(c):
    """Item 11: "demo\\u0000evil" used to route as demo and reach the upstream unchanged."""
    n = upstream_requests(c)
    for model in ("demo\u0000evil", "demo\nevil", "demo\u001b[31m", "demo\u007f"):
        refused(c, c.gw.chat(c.key, model=model), "invalid_value", "model")
    refused(c, c.gw.chat(c.key, model="demo", user="u\u0000x"), "invalid_value", "user")
    assert upstream_requests(c) == n, "a refused request reached the upstream"
    assert c.gw.chat(c.key, model="demo", user="plain user").status == 200


def test_invalid_utf8_body_is_invalid_json_R_API_3(c):
    """Item 12: invalid UTF-8 in model used to be reflected raw into the error body."""
    n = upstream_requests(c)
    for raw in (b'{"model":"demo\xff","messages":[{"role":"user","content":"x"}]}',
                b'{"model":"nope\xc3\x28","messages":[{"role":"user","content":"x"}]}',
                b'{"model":"demo","messages":[{"role":"user","content":"\xed\xa0\x80"}]}',
                # a NUL after the object was taken for white space and forwarded (found by tests/fuzz)
                b'{"model":"demo","messages":[{"role":"user","content":"x"}]}\r\x00 '):
        r = c.gw.request("POST", "/v1/chat/completions", raw, key=c.key)
        refused(c, r, "invalid_json", None)
    assert upstream_requests(c) == n
    # Valid multi-byte UTF-8 is fine, and echoed intact in a not-found message.
    r = c.gw.chat(c.key, model="modèle-日本")
    assert r.status == 404, r
    assert "modèle-日本" in json.loads(r.body.decode("utf-8"))["error"]["message"], r


def test_error_bodies_are_valid_utf8_for_any_path_R_API_3(c):
    """A request line with raw non-UTF-8 bytes: whatever answers, sluice's JSON is valid UTF-8."""
    s = socket.create_connection(("127.0.0.1", c.gw.port), 5)
    s.sendall(b"GET /v1/\xff\xfe/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), head
    if b"application/json" in head:
        text = body.decode("utf-8")          # raises on invalid UTF-8
        assert "error" in json.loads(text), text


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
