#!/usr/bin/env python3
"""rss.py: the peak of the summed RSS of some processes, for bench/run.

    rss.py OUTFILE PID...

Every 200 ms sums VmRSS of the PIDs (a process gone counts 0); on SIGTERM/SIGINT writes
"peak_kb=N" and "at_peak=PID:kB ..." to OUTFILE and exits. The sum of the VmHWM of each
would overstate it: their peaks need not be at the same moment."""
import signal
import sys
import time


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    out, pids = sys.argv[1], [int(p) for p in sys.argv[2:]]
    peak, at_peak = 0, {}
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    while not stop:
        now = {p: rss_kb(p) for p in pids}
        if sum(now.values()) > peak:
            peak, at_peak = sum(now.values()), now
        time.sleep(0.2)
    with open(out, "w") as f:
        f.write("peak_kb=%d\nat_peak=%s\n" % (peak, " ".join("%d:%d" % kv for kv in sorted(at_peak.items()))))


if __name__ == "__main__":
    main()
