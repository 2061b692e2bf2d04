#!/usr/bin/env python3
"""t0145-listen: sluice-fcgi --listen, its own supervisor, for fronts that do not start
FastCGI programs (issue 13: Apache mod_proxy_fcgi, nginx).

The supervisor opens the socket and keeps --processes responders: requests are served over
real FastCGI on it; a responder killed with SIGKILL is started again; SIGHUP reaches every
responder (they re-read sluice.conf); SIGTERM lets a request in flight finish, stops the
responders and removes the socket; a second supervisor on a socket in use is refused, and
so is a TCP address other than loopback."""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (FCGI, Fake, Gateway, add_endpoint, fcgi_request, run_tests, setup_tenant, setup_with, stop_all,
                     wait_for)


class Supervisor:
    def __init__(self, gw, sock, processes=2, extra=()):
        self.sock = sock
        self.out = open(os.path.join(gw.dir, "supervisor.out"), "ab")
        self.proc = subprocess.Popen([FCGI, "--listen", "unix:" + sock, "--processes", str(processes), "-c",
                                      gw.conf_path] + list(extra), stdout=self.out, stderr=self.out)

    def children(self):
        kids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid and fields[0] != "Z":
                kids.append(int(pid))
        return sorted(kids)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def build(c):
    c.fake = Fake("listen")
    c.gw = Gateway("t0145", procs=1, threads=8)
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.sock = os.path.join(c.gw.dir, "listen.sock")
    c.sup = Supervisor(c.gw, c.sock)
    wait_for(lambda: len(c.sup.children()) == 2 and os.path.exists(c.sock), 10, what="two responders")
    wait_for(lambda: chat(c).status == 200, 10, what="served on the socket")
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "sup", "fake")


def chat(c, content="hi"):
    return fcgi_request(c.sock, "POST", "/v1/chat/completions",
                        {"model": "m", "messages": [{"role": "user", "content": content}]},
                        headers={"Authorization": "Bearer " + c.key, "Content-Type": "application/json"})


def test_served_over_fastcgi_on_its_socket(c):
    r = chat(c)
    assert r.status == 200 and r.json()["choices"][0]["message"]["content"], r
    assert oct(os.stat(c.sock).st_mode & 0o777) == oct(0o660), oct(os.stat(c.sock).st_mode)


def test_a_killed_responder_is_started_again(c):
    kids = c.sup.children()
    os.kill(kids[0], signal.SIGKILL)
    wait_for(lambda: len(c.sup.children()) == 2 and kids[0] not in c.sup.children(), 10,
             what="a new responder")
    assert kids[1] in c.sup.children()
    for i in range(4):
        assert chat(c).status == 200


def test_sighup_reaches_every_responder(c):
    before = c.gw.log_text().count("SIGHUP: configuration re-read")
    c.sup.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: c.gw.log_text().count("SIGHUP: configuration re-read") >= before + 2, 5,
             what="both responders re-read")
    # still two (under ASan a respawn of the test before may still be settling)
    wait_for(lambda: len(c.sup.children()) == 2, 10, what="two responders after SIGHUP")


def test_a_socket_in_use_and_a_public_address_are_refused(c):
    p = subprocess.run([FCGI, "--listen", "unix:" + c.sock, "-c", c.gw.conf_path], capture_output=True, text=True,
                       timeout=20)
    assert p.returncode == 1 and "cannot listen" in p.stderr, p
    assert "another process is serving" in c.gw.log_text()
    assert chat(c).status == 200                    # the first one still serves
    p = subprocess.run([FCGI, "--listen", "0.0.0.0:9000", "-c", c.gw.conf_path], capture_output=True, text=True,
                       timeout=20)
    assert p.returncode == 1 and "loopback" in p.stderr, p
    p = subprocess.run([FCGI, "--processes", "2", "-c", c.gw.conf_path], capture_output=True, text=True, timeout=20)
    assert p.returncode == 2 and "go with --listen" in p.stderr, p


def test_a_responder_started_after_sighup_has_the_new_configuration(c):
    """The supervisor re-reads the file too: a responder it starts later runs with what
    the file says now, not with what it said when the supervisor started."""
    with open(c.gw.conf_path) as f:
        text = f.read()
    with open(c.gw.conf_path, "w") as f:
        f.write(text.replace("max_body_bytes = 8388608;", "max_body_bytes = 4096;"))
    try:
        before = c.gw.log_text().count("SIGHUP: configuration re-read")
        c.sup.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: c.gw.log_text().count("SIGHUP: configuration re-read") >= before + 3, 5,
                 what="the supervisor and both responders re-read")
        for pid in c.sup.children():
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: len(c.sup.children()) == 2, 10, what="new responders")
        big = "x" * 6000
        r = wait_for(lambda: (lambda r: r if r.status != 502 else None)(chat(c, big)), 10, what="served again")
        assert r.status == 413, r
    finally:
        with open(c.gw.conf_path, "w") as f:
            f.write(text)
        c.sup.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: chat(c, "x" * 6000).status == 200, 10, what="the old limit back")


def test_a_path_that_is_not_a_socket_is_left_alone(c):
    victim = os.path.join(c.gw.dir, "victim.txt")
    with open(victim, "w") as f:
        f.write("keep me")
    p = subprocess.run([FCGI, "--listen", "unix:" + victim, "-c", c.gw.conf_path], capture_output=True, text=True,
                       timeout=20)
    assert p.returncode == 1, p
    assert open(victim).read() == "keep me"
    assert "exists and is not a socket" in c.gw.log_text()
    p = subprocess.run([FCGI, "--listen", "unix:" + victim, "--daemon", "-c", c.gw.conf_path], capture_output=True,
                       text=True, timeout=20)
    assert p.returncode == 1 and open(victim).read() == "keep me", p


def test_sigterm_drains_then_stops(c):
    c.fake.behavior("ttfb_ms=1500")
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", chat(c, "slow")))
    t.start()
    wait_for(lambda: c.fake.stats()["inflight"] >= 1, 5, what="the request at the upstream")
    kids = c.sup.children()
    c.sup.proc.send_signal(signal.SIGTERM)
    t.join(20)
    assert out["r"].status == 200, out["r"]       # finished inside shutdown.grace_ms
    assert c.sup.proc.wait(20) == 0
    assert not os.path.exists(c.sock), "the socket is removed"
    for pid in kids:
        assert not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z"
    c.fake.behavior("")


run_tests(globals(), setup, teardown)
