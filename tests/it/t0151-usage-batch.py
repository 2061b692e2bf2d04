#!/usr/bin/env python3
"""t0151-usage-batch: the usage writer puts a batch's events in a few multi-row INSERTs
(issue 17); what the database gets is what one INSERT an event gave.

Real requests through the gateway; usage batches of 40 records (flush_ms at its maximum,
so a burst is one batch: 32 + 8 rows), on SQLite and on PostgreSQL. The events are all there, their ids in the order of
the requests, every column as the requests made it; a row the schema refuses (here a
trigger refuses model "bad") is left out alone: the rest of its statement's rows are
written one by one, the daily aggregates count it as before, and the writer goes on."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import SingleSetup, on_postgresql, run_tests, stop_setup, wait_for

N = 40


def setup():
    c = SingleSetup("t0151", "t0151", conf={"usage": "flush_ms = 1000; batch_max = %d;" % N})
    try:
        c.gw.ctl("route", "add", "bad", "ep", "--tenant", "acme")
        if on_postgresql():   # a check_violation: what the engine calls a refusal (SDB_CONSTRAINT)
            c.gw.sql_write("CREATE FUNCTION t0151_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                           " IF NEW.model = 'bad' THEN RAISE EXCEPTION 't0151 refuses this row'"
                           " USING ERRCODE = 'check_violation'; END IF; RETURN NEW; END $$")
            c.gw.sql_write("CREATE TRIGGER t0151_refuse BEFORE INSERT ON usage_events FOR EACH ROW"
                           " EXECUTE FUNCTION t0151_refuse()")
        else:
            c.gw.sql_write("CREATE TRIGGER t0151_refuse BEFORE INSERT ON usage_events WHEN NEW.model = 'bad'"
                           " BEGIN SELECT RAISE(ABORT, 't0151 refuses this row'); END")
        wait_for(lambda: c.gw.chat(c.key, model="bad").status == 200, 10, what="route live")
        assert c.gw.chat(c.key).status == 200
        wait_for(lambda: len(c.gw.usage_events()) >= 1, 10, what="the warm-up's event")
        return c
    except BaseException:
        c.stop()
        raise


def burst(c, tag, bad=()):
    """N requests one after the other, request ids tag-00.., those in bad to model "bad"."""
    before = c.gw.sql("SELECT COALESCE(MAX(id), 0) FROM usage_events")[0][0]
    for i in range(N):
        r = c.gw.chat(c.key, model="bad" if i in bad else "m", content="hello %d" % i,
                      headers={"X-Request-Id": "%s-%02d" % (tag, i)})
        assert r.status == 200, r.status
    want = N - len(bad)
    wait_for(lambda: len(c.gw.usage_events("id > ?", before)) >= want, 15, what="%d events" % want)
    return c.gw.usage_events("id > ?", before)


def test_every_event_in_request_order(c):
    ev = burst(c, "t151a")
    assert [e["request_id"] for e in ev] == ["t151a-%02d" % i for i in range(N)], [e["request_id"] for e in ev]
    ids = [e["id"] for e in ev]
    assert ids == list(range(ids[0], ids[0] + N)), ids
    for e in ev:
        assert e["model"] == "m" and e["status"] == 200 and e["path"] == "/v1/chat/completions", e
        assert e["prompt_tokens"] > 0 and e["completion_tokens"] > 0 and e["endpoint_id"] > 0, e
        assert e["error_code"] is None and e["content_rule"] is None and e["shadow"] == 0, e
    # the batch's texts are the records' own (bound without a copy): none repeats another's
    assert len({e["request_id"] for e in ev}) == N


def test_a_refused_row_is_left_out_alone(c):
    day = lambda: c.gw.sql("SELECT COALESCE(SUM(requests), 0) FROM usage_daily")[0][0]   # noqa: E731
    daily0 = day()
    bad = (5, 33)      # one in the 32-row statement, one in the 8-row one
    ev = burst(c, "t151b", bad)
    want = ["t151b-%02d" % i for i in range(N) if i not in bad]
    assert [e["request_id"] for e in ev] == want, [e["request_id"] for e in ev]
    assert all(e["model"] == "m" for e in ev), ev
    wait_for(lambda: day() == daily0 + N, 10, what="the daily aggregate of all %d" % N)
    log = c.gw.log_text()     # said (repeats are collapsed)
    assert "usage event was refused by the database" in log and "t0151 refuses this row" in log, log[-2000:]
    # the writer goes on
    ev = burst(c, "t151c")
    assert [e["request_id"] for e in ev] == ["t151c-%02d" % i for i in range(N)]


if __name__ == "__main__":
    run_tests(globals(), setup, stop_setup)
