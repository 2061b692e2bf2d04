#!/usr/bin/env python3
"""env.py: one sluice gateway (lighttpd + sluice-fcgi pool) in front of a given upstream, for bench/run.

    env.py --upstream http://127.0.0.1:PORT [--name N] [--procs P] [--threads T] [--keepalive-ms MS] [--obs on|off]

Builds it with tests/it/lib/harness.py (tenant, a member key without limits and one with
all six limits set high enough never to refuse, endpoint round_robin with the one replica,
route `m`; the same replica behind an endpoint with the stream-start guard off, route `mng`;
the same upstream as an anthropic endpoint, route `ma`), starts it, prints one JSON line
{port, key, key_limited, lighttpd_pid, responders, dir}, then answers commands read from
stdin, one per line:
    stats   -> one JSON line: usage_events counts and, per responder, VmHWM/VmRSS in kB
and stops everything it started when stdin closes or on SIGTERM/SIGINT."""
import argparse
import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("SLUICE_TEST_OUT", os.path.join(HERE, "out", "gw"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "it", "lib"))
from harness import CTL, Gateway, setup_tenant  # noqa: E402


def proc_status(pid):
    out = {"pid": pid}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmHWM", "VmRSS", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        out["gone"] = True
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--name", default="bench")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=128)
    ap.add_argument("--peak-threads", type=int, default=0,
                    help="threads per responder the front server is sized for (default: --threads)")
    ap.add_argument("--keepalive-ms", type=int, default=5000)
    ap.add_argument("--obs", choices=("on", "off"), default="on",
                    help="on: access log and trace log written (metrics are always kept); off: neither")
    a = ap.parse_args()

    def on_term(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_term)

    out = os.path.join(os.environ["SLUICE_TEST_OUT"], "%s-%d" % (a.name, os.getpid()))
    logs = ({"access_log": '"%s/access.log"' % out, "trace_log": '"%s/trace.log"' % out} if a.obs == "on"
            else {"access_log": '""', "trace_log": '""'})
    gw = Gateway(a.name, procs=a.procs, threads=a.threads, keepalive_ms=a.keepalive_ms, conf=logs,
                 peak_threads=a.peak_threads or None)
    try:
        key = setup_tenant(gw, "bench", "bencher")
        gw.ctl("endpoint", "add", "ep", "--tenant", "bench", "--algorithm", "round_robin")
        gw.ctl("replica", "add", "ep", a.upstream)
        gw.ctl("route", "add", "m", "ep", "--tenant", "bench")
        # R-KEY-1..5: qps, concurrency, daily, monthly, tpm and monthly tokens.
        limited = gw.ctl("key", "add", "--user", "bencher", "--qps", 100000, "--concurrency", 100000,
                         "--daily", 10 ** 9, "--monthly", 10 ** 10, "--tpm", 10 ** 10,
                         "--monthly-tokens", 10 ** 12)["key"]
        # R-SSE-5 off: the role-only first chunk goes out at once instead of with the first content.
        gw.ctl("endpoint", "add", "ep_ng", "--tenant", "bench", "--algorithm", "round_robin", "--stream-guard", "off")
        gw.ctl("replica", "add", "ep_ng", a.upstream)
        gw.ctl("route", "add", "mng", "ep_ng", "--tenant", "bench")
        # The same stand-in as an Anthropic Messages upstream (model "ma"): the
        # translation's cost is the difference between the two rows.
        gw.ctl("endpoint", "add", "ep_ant", "--tenant", "bench", "--algorithm", "round_robin",
               "--protocol", "anthropic")
        subprocess.run([CTL, "--db", gw.db, "endpoint", "set", "ep_ant", "--upstream-auth-stdin"],
                       input="bench-upstream-key\n", text=True, check=True, capture_output=True)
        gw.ctl("replica", "add", "ep_ant", a.upstream, "--engine", "anthropic")
        gw.ctl("route", "add", "ma", "ep_ant", "--tenant", "bench", "--target-model", "claude-bench")
        gw.start()
        started = gw.responder_pids()
        print(json.dumps({"port": gw.port, "key": key, "key_limited": limited, "lighttpd_pid": gw.proc.pid,
                          "responders": started, "dir": gw.dir}), flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "stats":
                rows = gw.sql("SELECT count(*), coalesce(sum(status = 200), 0), coalesce(sum(stream), 0) "
                              "FROM usage_events")
                now = gw.responder_pids()
                print(json.dumps({"usage_events": rows[0][0], "usage_200": rows[0][1], "usage_stream": rows[0][2],
                                  "responders": [proc_status(p) for p in now],
                                  "restarted": sorted(set(now) ^ set(started)),
                                  "lighttpd": proc_status(gw.proc.pid)}), flush=True)
            elif cmd:
                print(json.dumps({"error": "unknown command %r" % cmd}), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        gw.stop()


if __name__ == "__main__":
    main()
