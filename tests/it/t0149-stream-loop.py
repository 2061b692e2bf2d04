#!/usr/bin/env python3
"""t0149-stream-loop: a stream, once asked of its upstream, leaves its worker thread for the
responder's stream loop (pool.park_streams, issue 17): many more streams than threads run at
once, each complete and byte-exact, a client that stops reading holds up only its own stream,
and a client that leaves ends its upstream transfer and is accounted. (A retry after a parked
attempt failed before content, on a thread again: t0005's R-SSE-5 failover.)"""
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (Fake, Gateway, _fcgi_len, _fcgi_record, add_endpoint, burst, fcgi_sockets, run_tests,
                     setup_tenant, threads_of, wait_for)

THREADS = 4                      # pool.threads = pool.max_threads: the pool cannot grow
STREAMS = 60
CHUNKS, GAP_MS = 4, 250          # one stream lasts about 1 s


class Ctx:
    pass


class ReuseDies:
    """An upstream that closes a kept-alive connection when a second stream comes on it,
    having read it (as a server whose keep-alive timeout ran out meanwhile): curl makes a
    fresh connection and asks again, within one turn of the stream loop. Streams on a fresh
    connection get three events 50 ms apart."""

    def __init__(self, gap=0.05):
        self.gap = gap
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.died = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        buf, n = b"", 0
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    got = conn.recv(65536)
                    if not got:
                        return
                    buf += got
                head, buf = buf.split(b"\r\n\r\n", 1)
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                n += 1
                if not head.startswith(b"POST"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
                                 b'{"data":[]}')
                    continue
                if n > 1:
                    time.sleep(0.05)
                    self.died += 1
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                for k in range(1, 4):
                    ev = ('data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":'
                          '[{"index":0,"delta":{"content":"%sw%d"},"finish_reason":null}]}\n\n' % (" " if k > 1 else "", k))
                    conn.sendall(b"%x\r\n%s\r\n" % (len(ev), ev.encode()))
                    time.sleep(self.gap)
                ev = b"data: [DONE]\n\n"
                conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(ev), ev))
        except OSError:
            pass
        finally:
            conn.close()

    def stop(self):
        self.sock.close()


def setup():
    c = Ctx()
    c.fake = Fake("loop")
    c.reuse = ReuseDies()
    c.gw = Gateway("t0149", procs=1, threads=THREADS, peak_threads=THREADS + 8,
                   conf={"pool": "processes = 1; threads = %d; max_threads = %d;" % (THREADS, THREADS)})
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    add_endpoint(c.gw, "ep-reuse", "acme", [c.reuse])
    c.gw.ctl("route", "add", "mr", "ep-reuse", "--tenant", "acme")
    c.gw.start()
    c.pid = c.gw.responder_pids()[0]
    for _ in range(3):
        assert c.gw.chat(c.key).status == 200
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()
        c.reuse.stop()


def body(content):
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": content}]}


def words_of(chunks):
    """The content words of an OpenAI stream, and whether it ended with [DONE]."""
    text = b"".join(b for _, b in chunks).decode()
    words, done = [], False
    for line in text.split("\n"):
        if line == "data: [DONE]":
            done = True
        elif line.startswith("data: {"):
            for ch in json.loads(line[6:]).get("choices", []):
                if ch.get("delta", {}).get("content"):
                    words.append(ch["delta"]["content"])
    return "".join(words), done


def test_more_streams_than_threads_run_at_once(c):
    """60 streams of ~1 s through a responder of 4 threads that may not grow: with each stream
    on its thread they would take 15 s in rounds of 4; on the stream loop they run together,
    and every one is whole."""
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], threads_of(c.pid))
            time.sleep(0.05)
    s = threading.Thread(target=sample)
    s.start()
    t0 = time.time()
    res = burst(lambda i: c.gw.stream_raw(c.key, body("s%d" % i), timeout=60,
                                          headers={"X-Fake-Behavior": "chunks=%d;gap_ms=%d" % (CHUNKS, GAP_MS)}),
                STREAMS)
    took = time.time() - t0
    stop.set()
    s.join()
    for r in res:
        assert not isinstance(r, Exception), r
        status, _, chunks = r
        text, done = words_of(chunks)
        assert status == 200 and done and text == "w1 w2 w3 w4", (status, text, done)
    assert took < 6, "60 streams took %.1f s with 4 threads: they waited for threads" % took
    wait_for(lambda: len(c.gw.usage_events("model = 'm' AND status = 200 AND completion_tokens = 4")) >= STREAMS,
             10, what="one usage event per stream")
    # the pool's own threads plus the writers: no thread per stream
    assert peak[0] < THREADS + 16, peak[0]


def test_the_loop_wakes_on_the_upstream_socket(c):
    """The loop is woken by the stream's own upstream socket (curl opens it through sluice, so
    the worker knows it), not by a clock: the first event of 20 sequential streams comes as
    fast as the stand-in sends it, and no transfer was turned by the clock."""
    firsts = []
    for i in range(20):
        _, _, chunks = c.gw.stream_raw(c.key, body("q%d" % i), headers={"X-Fake-Behavior": "chunks=2;gap_ms=0"})
        firsts.append(next(t for t, b in chunks if b"data: {" in b))
    firsts.sort()
    assert firsts[10] < 0.008, "median first event %.1f ms" % (firsts[10] * 1000)
    assert "upstream socket is not known" not in c.gw.log_text()


def test_a_connection_made_again_on_the_loop_is_watched(c):
    """curl gives up a kept-alive connection its server closed after the request and makes a
    fresh one, while the stream is on the loop: that socket (often the closed one's number) is
    watched like the first, so the stream's events come as sent, not once a second."""
    took = []
    for i in range(12):
        t0 = time.time()
        status, _, chunks = c.gw.stream_raw(c.key, {"model": "mr", "stream": True,
                                                    "messages": [{"role": "user", "content": "r%d" % i}]})
        took.append(time.time() - t0)
        text, done = words_of(chunks)
        assert status == 200 and done and text == "w1 w2 w3", (status, text, done)
    assert c.reuse.died > 0, "no stream came on a kept-alive connection"
    assert max(took) < 0.7, "streams took %s s (%d on a connection made again)" % (
        " ".join("%.2f" % t for t in took), c.reuse.died)


def raw_stream(c, content, behavior):
    """A stream whose client never reads: the socket, after the request went out."""
    s = socket.create_connection(("127.0.0.1", c.gw.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    payload = json.dumps(body(content)).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + c.key.encode() +
              b"\r\nContent-Type: application/json\r\nX-Fake-Behavior: " + behavior.encode() +
              b"\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    return s


def test_a_client_that_stops_reading_holds_up_only_its_own_stream(c):
    """A stream of 200 000 words to a client that reads nothing: the front server and the
    FastCGI socket fill, that stream's upstream waits; ten other streams meanwhile arrive on
    time. Then the slow client leaves: its stream ends, accounted as the client's leaving."""
    slow = raw_stream(c, "slow-reader", "chunks=200000;gap_ms=0")
    time.sleep(1.5)                  # long enough to fill every buffer on the way
    t0 = time.time()
    res = burst(lambda i: c.gw.stream_raw(c.key, body("beside%d" % i), timeout=30,
                                          headers={"X-Fake-Behavior": "chunks=3;gap_ms=100"}), 10)
    took = time.time() - t0
    for r in res:
        assert not isinstance(r, Exception), r
        status, _, chunks = r
        text, done = words_of(chunks)
        assert status == 200 and done and text == "w1 w2 w3", (status, text)
    assert took < 4, "streams beside a stalled client took %.1f s" % took
    slow.close()
    wait_for(lambda: c.gw.usage_events("error_code = 'client_disconnected'"), 15,
             what="the slow client's stream accounted as disconnected")


def fds_of(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def fcgi_unread(c, content, behavior):
    """A stream asked of the responder straight over FastCGI (no front server buffering in
    between) by a front server that then reads nothing: the socket."""
    import struct
    payload = json.dumps(body(content)).encode()
    params = {"REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/chat/completions", "SCRIPT_NAME": "",
              "CONTENT_LENGTH": str(len(payload)), "CONTENT_TYPE": "application/json",
              "HTTP_AUTHORIZATION": "Bearer " + c.key, "HTTP_X_FAKE_BEHAVIOR": behavior, "REMOTE_ADDR": "127.0.0.1"}
    pairs = b"".join(_fcgi_len(len(k)) + _fcgi_len(len(v)) + k.encode() + v.encode() for k, v in params.items())
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(fcgi_sockets(c.gw)[0])
    s.sendall(_fcgi_record(1, struct.pack("!HB5x", 1, 0)) + _fcgi_record(4, pairs) + _fcgi_record(4, b"") +
              _fcgi_record(5, payload) + _fcgi_record(5, b""))
    return s


def test_a_stream_that_ends_before_its_client_read_it_holds_up_nothing(c):
    """Thirteen front-server connections that read nothing get streams of ~150-400 KB: each
    ends upstream while part of it still waits for the socket (more than its buffer holds,
    and for some less than the 64 KiB that would pause the upstream). The end of such a
    stream never waits for its reader: ten streams beside them arrive on time; once the
    readers close, every connection they held is closed too."""
    fds_before = fds_of(c.pid)
    slow = [fcgi_unread(c, "tail%d" % i, "chunks=%d;gap_ms=0" % (1200 + 100 * i)) for i in range(13)]
    time.sleep(0.2)
    t0 = time.time()
    res = burst(lambda i: c.gw.stream_raw(c.key, body("next%d" % i), timeout=30,
                                          headers={"X-Fake-Behavior": "chunks=10;gap_ms=100"}), 10)
    took = time.time() - t0
    for r in res:
        assert not isinstance(r, Exception), r
        status, _, chunks = r
        text, done = words_of(chunks)
        assert status == 200 and done and text == " ".join("w%d" % k for k in range(1, 11)), (status, text)
    assert took < 4, "streams beside unread stream ends took %.1f s" % took
    for s in slow:
        s.close()
    wait_for(lambda: fds_of(c.pid) <= fds_before + 4, 15, what="the slow readers' connections closed")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_front_server_that_hangs_up_after_an_odd_record_spins_nothing(c):
    """A front server sends a record the stream does not expect (FCGI_GET_VALUES: answered, then
    the client watch stops rather than spin on it), then closes the connection: the hang-up
    ends the stream at once, and the loop does not turn it without end until its next write."""
    import struct
    before = len(c.gw.usage_events("error_code = 'client_disconnected'"))
    s = fcgi_unread(c, "odd-record", "chunks=3;gap_ms=4000")
    s.settimeout(10)
    got = b""
    while b"data: {" not in got:
        got += s.recv(65536)
    s.sendall(struct.pack("!BBHHBB", 1, 9, 0, 0, 0, 0))      # FCGI_GET_VALUES, nothing asked
    time.sleep(0.3)
    s.close()
    time.sleep(0.2)
    cpu0 = cpu_s(c.pid)
    time.sleep(1.5)
    spent = cpu_s(c.pid) - cpu0
    assert spent < 0.3, "the responder spent %.2f s of CPU in 1.5 s with nothing to do" % spent
    wait_for(lambda: len(c.gw.usage_events("error_code = 'client_disconnected'")) > before, 3,
             what="the hang-up accounted as the client's leaving")


def test_a_client_that_leaves_ends_the_upstream_transfer(c):
    """A long stream whose client closes after the first event: sluice aborts the upstream
    transfer (the stand-in sees its connection end long before its 40 chunks) and records it."""
    before = len(c.gw.usage_events("error_code = 'client_disconnected'"))
    s = raw_stream(c, "leaver", "chunks=40;gap_ms=250")
    s.settimeout(10)
    got = b""
    while b"data: {" not in got:
        got += s.recv(4096)
    s.close()
    wait_for(lambda: len(c.gw.usage_events("error_code = 'client_disconnected'")) > before, 8,
             what="the disconnect accounted")
    # the stand-in sees the end at its next write (250 ms apart), long before its 40 chunks (10 s)
    wait_for(lambda: c.fake.stats()["inflight"] == 0, 3, what="the upstream transfer ended")


def test_a_stream_end_that_waits_holds_up_no_other_stream(c):
    """The end of a stream may wait (here the usage queue is full while the database is locked:
    back-pressure; also a locked database for idempotency, a Redis `state` that does not
    answer): it waits on a thread of its own, never on the loop, so a stream beside it keeps
    its pace."""
    gw = Gateway("t0149-q", procs=1, threads=THREADS,
                 conf={"pool": "processes = 1; threads = %d; max_threads = 200;" % THREADS,
                       "usage": "flush_ms = 50; batch_max = 1; queue_max = 100;"})
    slow = ReuseDies(gap=0.6)               # three events 0.6 s apart
    try:
        key = setup_tenant(gw, "acme", "alice")
        add_endpoint(gw, "ep", "acme", [c.fake])
        gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
        add_endpoint(gw, "ep-slow", "acme", [slow])
        gw.ctl("route", "add", "ms", "ep-slow", "--tenant", "acme")
        gw.start()
        assert gw.chat(key).status == 200
        out = {}

        def stream(name, model, behavior):
            out[name] = gw.stream_raw(key, dict(body(name), model=model), timeout=30,
                                      headers={"X-Fake-Behavior": behavior})
        beside = threading.Thread(target=stream, args=("beside", "m", "chunks=50;gap_ms=100"))
        beside.start()
        time.sleep(0.2)
        ending = threading.Thread(target=stream, args=("ending", "ms", ""))
        ending.start()
        time.sleep(0.2)
        with gw.write_lock():               # the usage writer cannot write: its queue fills
            fill = threading.Thread(target=burst, args=(lambda i: gw.chat(key, content="f%d" % i), 110))
            fill.start()
            time.sleep(3)                   # the other stream ends meanwhile; its usage record waits
        ending.join(30)
        beside.join(30)
        fill.join(60)
        status, _, chunks = out["beside"]
        text, done = words_of(chunks)
        assert status == 200 and done and text == " ".join("w%d" % k for k in range(1, 51)), (status, text)
        assert out["ending"][0] == 200, out["ending"][0]
        times = [t for t, _ in chunks]
        gap = max(b - a for a, b in zip(times, times[1:]))
        assert gap < 0.6, "the stream beside stood still %.2f s while another stream's end waited" % gap
    finally:
        gw.stop()
        slow.stop()


def fcgi_read_to_end(s):
    """The STDOUT of a FastCGI answer, and whether its END_REQUEST came."""
    import struct
    buf, out = b"", b""
    while True:
        while len(buf) >= 8:
            _, rtype, _, clen, pad, _ = struct.unpack("!BBHHBB", buf[:8])
            if len(buf) < 8 + clen + pad:
                break
            if rtype == 6:
                out += buf[8:8 + clen]
            elif rtype == 3:
                return out, True
            buf = buf[8 + clen + pad:]
        got = s.recv(65536)
        if not got:
            return out, False
        buf += got


def test_the_shutdown_waits_for_stream_ends_still_being_sent(c):
    """SIGTERM while the ends of streams wait for readers that are slow: the responder stays
    until they are sent (within its grace, as for requests still running, R-DEP-6), rather
    than exit and cut them short."""
    import signal
    gw = Gateway("t0149-stop", procs=1, threads=THREADS,
                 conf={"pool": "processes = 1; threads = %d; max_threads = %d;" % (THREADS, THREADS)})
    try:
        g = Ctx()
        g.gw, g.key = gw, setup_tenant(gw, "acme", "alice")
        add_endpoint(gw, "ep", "acme", [c.fake])
        gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
        gw.start()
        socks = [fcgi_unread(g, "stop%d" % i, "chunks=%d;gap_ms=0" % (1200 + 100 * i)) for i in range(13)]
        time.sleep(1.0)                     # every stream ended upstream or waits for its reader
        os.kill(gw.responder_pids()[0], signal.SIGTERM)
        time.sleep(0.5)
        ends = []
        for s in reversed(socks):           # the longest first: the ends given away come last
            s.settimeout(10)
            out, ended = fcgi_read_to_end(s)
            ends.append(ended and out.rstrip().endswith(b"data: [DONE]"))
            s.close()
        assert all(ends), "%d of 13 streams cut short at the shutdown" % ends.count(False)
    finally:
        gw.stop()


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
