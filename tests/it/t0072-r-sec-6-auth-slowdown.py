#!/usr/bin/env python3
"""t0072-r-sec-6-auth-slowdown: one client's bad keys never lock out the valid keys behind the
same address (NAT, a reverse proxy); the slow-down applies to failing attempts, per address and
key prefix (and address-wide at ten times the budget); a trusted front's X-Forwarded-For names
the client (R-SEC-6)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import SingleSetup, run_tests, stop_setup


def setup():
    return SingleSetup("t0072", "slow", procs=2,
                       conf={"auth": "key_cache_ms = 30000; fail_limit = 5; fail_window_ms = 60000;",
                             "limits": 'max_body_bytes = 8388608; max_response_bytes = 67108864;'
                                       ' max_sse_event_bytes = 4194304; trusted_proxies = "127.0.0.1";'})


def models(c, key, xff=None):
    h = {"X-Forwarded-For": xff} if xff else None
    return c.gw.request("GET", "/v1/models", key=key, headers=h)


def test_a_valid_key_is_never_refused_for_others_failures_R_SEC_6(c):
    codes = [models(c, "sk-typo-mine-%d" % i).status for i in range(8)]
    assert codes[:5] == [401] * 5 and codes[5:] == [429] * 3, codes
    r = models(c, "sk-typo-mine-x")
    assert r.status == 429 and r.json()["error"]["code"] == "too_many_auth_failures", r
    assert int(r.headers["retry-after"]) >= 1, r.headers
    # The colleague behind the same address, with a valid key: served.
    r = models(c, c.key)
    assert r.status == 200, r
    assert c.gw.chat(c.key).status == 200
    # Another client's mistakes (another prefix) are its own budget.
    assert models(c, "sk-other-client-1").status == 401


def test_address_wide_budget_stops_guessing_R_SEC_6(c):
    """Ever new keys from one address: ten times the budget, then 429 for failing attempts."""
    codes = [models(c, "sk-%04dguess" % i, xff="203.0.113.9").status for i in range(52)]
    assert codes.count(401) == 50 and codes[-2:] == [429, 429], codes
    assert models(c, c.key, xff="203.0.113.9").status == 200


def test_trusted_front_names_the_client_R_SEC_6(c):
    """Behind the trusted front (127.0.0.1) clients are told apart by X-Forwarded-For; a hop the
    client prepended itself does not count."""
    for i in range(6):
        models(c, "sk-bad-proxyclient-%d" % i, xff="198.51.100.1")
    assert models(c, "sk-bad-proxyclient-x", xff="198.51.100.1").status == 429
    assert models(c, "sk-bad-proxyclient-x", xff="198.51.100.2").status == 401
    assert models(c, "sk-bad-proxyclient-x", xff="1.2.3.4, 198.51.100.1").status == 429


def test_spraying_prefixes_cannot_blind_the_slow_down_R_SEC_6(c):
    """Many clients spraying ever new prefixes used to fill the table, after which nobody was
    slowed: per-client counters are kept apart and a full window evicts its oldest entry."""
    for a in range(12):
        for i in range(40):
            models(c, "sk-%02d%02dspray" % (a, i), xff="192.0.2.%d" % (10 + a))
    for a in range(3):
        codes = [models(c, "sk-samekey-x", xff="198.18.0.%d" % (1 + a)).status for _ in range(8)]
        assert codes[:5] == [401] * 5 and codes[5:] == [429] * 3, (a, codes)


def test_an_ipv6_slash64_is_one_client_R_SEC_6(c):
    codes = [models(c, "sk-v6rotate-x", xff="2001:db8:1:2::%x" % (i + 1)).status for i in range(7)]
    assert codes[:5] == [401] * 5 and codes[5:] == [429] * 2, codes
    assert models(c, "sk-v6rotate-x", xff="2001:db8:1:3::1").status == 401     # another /64


if __name__ == "__main__":
    run_tests(globals(), setup, stop_setup)
