#!/usr/bin/env python3
"""t0071-r-sec-4-input-hygiene: strings sluice interprets hold no control characters, bodies
are valid UTF-8 JSON, and everything sluice writes into JSON is valid UTF-8 (R-SEC-4, R-API-3)."""
import json
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import SingleSetup, _fcgi_len, _fcgi_record, fcgi_request, fcgi_sockets, run_tests, stop_setup


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


def kept_requests(sock_path, key, bodies):
    """POSTs to /v1/chat/completions on one kept FastCGI connection (FCGI_KEEP_CONN), so one
    responder thread parses them all in order; the HTTP status of each."""
    statuses = []
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(sock_path)
    try:
        for i, body in enumerate(bodies):
            rid = i + 1
            params = {"REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/chat/completions", "SCRIPT_NAME": "",
                      "CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": "application/json",
                      "HTTP_AUTHORIZATION": "Bearer " + key, "REMOTE_ADDR": "127.0.0.1"}
            pairs = b"".join(_fcgi_len(len(k)) + _fcgi_len(len(v)) + k.encode() + v.encode() for k, v in params.items())
            s.sendall(_fcgi_record(1, struct.pack("!HB5x", 1, 1), rid) + _fcgi_record(4, pairs, rid) +
                      _fcgi_record(4, b"", rid) + _fcgi_record(5, body, rid) + _fcgi_record(5, b"", rid))
            data, out = b"", b""
            while True:
                while len(data) >= 8:
                    _, rtype, _, clen, pad, _ = struct.unpack("!BBHHBB", data[:8])
                    if len(data) < 8 + clen + pad:
                        break
                    content, data = data[8:8 + clen], data[8 + clen + pad:]
                    if rtype == 6:
                        out += content
                    elif rtype == 3:
                        data = None
                        break
                if data is None:
                    break
                b = s.recv(65536)
                assert b, "the kept connection closed"
                data += b
            status = 200
            for line in out.split(b"\r\n\r\n")[0].split(b"\r\n"):
                if line.lower().startswith(b"status:"):
                    status = int(line.split()[1])
            statuses.append(status)
    finally:
        s.close()
    return statuses


def test_a_broken_body_leaves_nothing_for_the_next_R_SEC_4(c):
    """A body cut inside a \\u escape pair left its high surrogate in the thread's JSON tokener:
    the next request's "\\u00e9" reached the upstream as U+FFFD + e-acute, and a lone low
    surrogate paired with the other caller's half into an emoji."""
    sock = fcgi_sockets(c.gw)[0]
    cut = b'{"model":"demo","messages":[{"role":"user","content":"\\ud83d'
    for text, want in (("\\u00e9", "\u00e9"), ("\\ude00", "\ufffd")):
        good = b'{"model":"demo","stream":true,"messages":[{"role":"user","content":"%s"}]}' % text.encode()
        assert kept_requests(sock, c.key, [cut, good]) == [400, 200]
        sent = json.loads(c.fake.stats()["last"]["body"])
        got = sent["messages"][0]["content"]
        assert got == want, "the upstream got %r for %s" % (got, text)


def test_a_body_that_never_ended_is_not_forwarded(c):
    """Without CONTENT_LENGTH (Apache's chunked bodies) the body ends with the empty stdin
    record; a connection half-closed or a request aborted before it used to send what had come
    to the upstream as the whole body."""
    sock = fcgi_sockets(c.gw)[0]
    body = b'{"model":"demo","messages":[{"role":"user","content":"x"}]}'
    params = {"REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/chat/completions", "SCRIPT_NAME": "",
              "CONTENT_TYPE": "application/json", "HTTP_AUTHORIZATION": "Bearer " + c.key}
    pairs = b"".join(_fcgi_len(len(k)) + _fcgi_len(len(v)) + k.encode() + v.encode() for k, v in params.items())
    for how in ("half-close", "abort"):
        n = upstream_requests(c)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(sock)
        s.sendall(_fcgi_record(1, struct.pack("!HB5x", 1, 0)) + _fcgi_record(4, pairs) + _fcgi_record(4, b"") +
                  _fcgi_record(5, body))
        if how == "abort":
            s.sendall(_fcgi_record(2, b""))
        else:
            s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            b = s.recv(65536)          # a hang is a socket.timeout
            if not b:
                break
            data += b
        s.close()
        assert b"Status: 400" in data and b"invalid_body" in data, (how, data[:300])
        assert upstream_requests(c) == n, "%s: a body that never ended reached the upstream" % how


if __name__ == "__main__":
    run_tests(globals(), setup, stop_setup)
