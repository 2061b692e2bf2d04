#!/usr/bin/env python3
"""t0073-r-dep-6-shutdown-cut: a stream still running when the responder's shutdown grace ends
gets a final shutting_down error event (not a cut mid-byte) and is recorded as 503
shutting_down with the tokens it produced, not as 499 client_disconnected (R-DEP-6, R-USE-4)."""
import http.client
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import SingleSetup, run_tests, stop_setup, wait_for


def setup():
    return SingleSetup("t0073", "cut", conf={"shutdown": "grace_ms = 1000;"})


def test_stream_past_the_grace_ends_with_shutting_down_R_DEP_6(c):
    pid = c.gw.responder_pids()[0]
    conn = http.client.HTTPConnection("127.0.0.1", c.gw.port, timeout=15)
    conn.request("POST", "/v1/chat/completions",
                 body=json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "long"}]}),
                 headers={"Authorization": "Bearer " + c.key, "Content-Type": "application/json",
                          "X-Request-Id": "cut-1", "X-Fake-Behavior": "chunks=40;gap_ms=300"})
    resp = conn.getresponse()
    assert resp.status == 200
    got = b""
    while got.count(b'"content":"w') < 2:
        got += resp.read1(65536)
    os.kill(pid, signal.SIGTERM)
    t0 = time.time()
    while time.time() - t0 < 8:
        b = resp.read1(65536)
        if not b:
            break
        got += b
    conn.close()
    text = got.decode()
    events = [l[6:] for l in text.split("\n") if l.startswith("data: ")]
    last = json.loads(events[-1])
    assert last["error"]["code"] == "shutting_down", events[-3:]
    produced = sum(1 for e in events if '"content":"w' in e)
    assert 2 <= produced < 40, produced
    assert time.time() - t0 < 5, "the stream outlived the grace"
    row = wait_for(lambda: c.gw.usage_events("request_id = 'cut-1'"), 5, what="usage row")[0]
    assert row["status"] == 503 and row["error_code"] == "shutting_down", row
    assert row["completion_tokens"] == produced and row["prompt_tokens"] > 0, (row, produced)


if __name__ == "__main__":
    run_tests(globals(), setup, stop_setup)
