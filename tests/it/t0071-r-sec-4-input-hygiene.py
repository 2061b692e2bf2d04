#!/usr/bin/env python3
"""t0071-r-sec-4-input-hygiene: strings sluice interprets hold no control characters, bodies
are valid UTF-8 JSON, and everything sluice writes into JSON is valid UTF-8 (R-SEC-4, R-API-3)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import SingleSetup, fcgi_request, fcgi_sockets, run_tests, stop_setup


def setup():
    return SingleSetup("t0071", "hyg", model="demo")


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
    """A path with raw non-UTF-8 bytes, straight to a responder (as a lenient front server would
    pass it): the 404 that echoes it is valid UTF-8, the bad bytes replaced by U+FFFD."""
    sock = fcgi_sockets(c.gw)[0]
    r = fcgi_request(sock, "GET", "/v1/\udcff\udcfe/x", headers={"Authorization": "Bearer " + c.key})
    assert r.status == 404, r
    text = r.body.decode("utf-8")                # strict: raises on invalid UTF-8
    e = json.loads(text)["error"]
    assert e["code"] == "not_found" and "/v1/\ufffd\ufffd/x" in e["message"], e


if __name__ == "__main__":
    run_tests(globals(), setup, stop_setup)
