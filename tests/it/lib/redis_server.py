"""redis_server.py: a redis-server of a test's (or a benchmark's) own, on a unix socket in
its out folder, no persistence, stopped by its PID (issue 19's Redis state)."""
import os
import shutil
import subprocess

from harness import stop_process, wait_for

REDIS = shutil.which("redis-server") or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)


class Redis:
    """A redis-server of the test's own on a unix socket, no persistence."""

    def __init__(self, folder):
        self.dir = folder
        os.makedirs(folder, exist_ok=True)
        self.sock = os.path.join(folder, "redis.sock")
        self.proc = None
        self.start()

    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.proc = subprocess.Popen([REDIS, "--port", "0", "--unixsocket", self.sock, "--unixsocketperm", "700",
                                      "--save", "", "--appendonly", "no", "--dir", self.dir, "--daemonize", "no"],
                                     stdout=log, stderr=log)
        wait_for(lambda: os.path.exists(self.sock), 10, what="redis-server's socket")
        return self

    def stop(self):
        stop_process(self.proc, 10)
        self.proc = None
