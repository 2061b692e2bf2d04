/* test_passive.c: the passive ban / circuit state machine (fcgi/passive.h, R-HC-5). */
#include "check.h"

#include "passive.h"

#include <stdint.h>
#include <string.h>

/* R-HC-5: 15 s ban, 3 failures open for 30 s, then at most 2 half-open trials. */
static const struct passive_conf conf = {.ban_ms = 15000, .circuit_failures = 3,
                                         .circuit_open_ms = 30000, .half_open_trials = 2};

enum op { AVAIL, PICK, FAIL, OK, END };

struct step {
    enum op op;
    int64_t t;          /* now, ms */
    int want;           /* AVAIL: passive_available; PICK/OK: changed; FAIL: ignored */
    int circuit;        /* expected circuit after the step, -1 = don't care */
};

#define C CIRCUIT_CLOSED
#define O CIRCUIT_OPEN
#define H CIRCUIT_HALF_OPEN

static const struct {
    const char *name;
    struct step s[24];
} scenarios[] = {
    {"fresh replica",
     {{AVAIL, 1000, 1, C}, {PICK, 1000, 0, C}, {OK, 1000, 0, C}, {AVAIL, 1000, 1, C}, {END, 0, 0, -1}}},
    /* R-HC-5: one proxy failure bans the replica for 15 s */
    {"one failure bans for ban_ms",
     {{FAIL, 100000, 0, C},
      {AVAIL, 100000, 0, C},
      {AVAIL, 114999, 0, C},
      {PICK, 110000, 0, C},      /* a pick while banned (R-HC-5 "use them anyway") changes nothing */
      {AVAIL, 115000, 1, C},
      {AVAIL, 200000, 1, C},
      {END, 0, 0, -1}}},
    {"two failures: still closed, ban renewed",
     {{FAIL, 100000, 0, C},
      {FAIL, 115000, 0, C},
      {AVAIL, 129999, 0, C},
      {AVAIL, 130000, 1, C},
      {END, 0, 0, -1}}},
    /* R-HC-5: 3 consecutive failures open the circuit for 30 s */
    {"three failures open the circuit",
     {{FAIL, 100000, 0, C},
      {FAIL, 100001, 0, C},
      {FAIL, 100002, 0, O},
      {AVAIL, 100002, 0, O},
      {AVAIL, 115002, 0, O},     /* ban over, circuit still open */
      {AVAIL, 130001, 0, O},
      {PICK, 130001, 0, O},      /* before open time: no trial handed out */
      {AVAIL, 130002, 1, O},     /* open time over: a trial may go */
      {END, 0, 0, -1}}},
    {"success between failures resets the count",
     {{FAIL, 100000, 0, C},
      {FAIL, 100001, 0, C},
      {OK, 115001, 1, C},
      {FAIL, 120000, 0, C},
      {FAIL, 120001, 0, C},
      {AVAIL, 135001, 1, C},     /* only 2 in a row: banned, not open */
      {END, 0, 0, -1}}},
    /* R-HC-5: half-open allows at most half_open_trials picks */
    {"half-open trials are capped",
     {{FAIL, 0, 0, C},
      {FAIL, 1, 0, C},
      {FAIL, 2, 0, O},
      {AVAIL, 30002, 1, O},
      {PICK, 30002, 1, H},       /* first trial */
      {AVAIL, 30003, 1, H},
      {PICK, 30003, 1, H},       /* second trial */
      {AVAIL, 30004, 0, H},      /* no third */
      {END, 0, 0, -1}}},
    /* R-HC-5: a failed trial reopens the circuit for a fresh open period */
    {"failure while half-open reopens",
     {{FAIL, 0, 0, C},
      {FAIL, 1, 0, C},
      {FAIL, 2, 0, O},
      {PICK, 30002, 1, H},
      {FAIL, 30500, 0, O},
      {AVAIL, 30500, 0, O},
      {AVAIL, 60499, 0, O},
      {AVAIL, 60500, 1, O},
      {PICK, 60500, 1, H},
      {AVAIL, 60500, 1, H},
      {END, 0, 0, -1}}},
    /* R-HC-5: success closes and clears everything */
    {"success while half-open closes",
     {{FAIL, 0, 0, C},
      {FAIL, 1, 0, C},
      {FAIL, 2, 0, O},
      {PICK, 30002, 1, H},
      {PICK, 30003, 1, H},
      {OK, 30100, 1, C},
      {AVAIL, 30100, 1, C},
      {PICK, 30100, 0, C},
      {OK, 30101, 0, C},         /* nothing left to change */
      {FAIL, 30200, 0, C},       /* the count starts again from zero */
      {AVAIL, 30200, 0, C},
      {AVAIL, 45200, 1, C},
      {END, 0, 0, -1}}},
    {"success while banned lifts the ban",
     {{FAIL, 1000, 0, C}, {AVAIL, 1001, 0, C}, {OK, 1002, 1, C}, {AVAIL, 1002, 1, C}, {END, 0, 0, -1}}},
    {"success while open closes",
     {{FAIL, 0, 0, C}, {FAIL, 0, 0, C}, {FAIL, 0, 0, O}, {OK, 10, 1, C}, {AVAIL, 10, 1, C}, {END, 0, 0, -1}}},
    {"success on a clean replica changes nothing",
     {{OK, 5, 0, C}, {OK, 6, 0, C}, {AVAIL, 7, 1, C}, {END, 0, 0, -1}}},
};

static const char *op_name(enum op o)
{
    switch (o) {
    case AVAIL: return "available";
    case PICK: return "on_pick";
    case FAIL: return "on_failure";
    case OK: return "on_success";
    default: return "end";
    }
}

int main(void)
{
    for (size_t k = 0; k < sizeof scenarios / sizeof scenarios[0]; k++) {
        struct passive_state s;
        memset(&s, 0, sizeof s);
        s.circuit = CIRCUIT_CLOSED;
        for (int i = 0; scenarios[k].s[i].op != END; i++) {
            const struct step *st = &scenarios[k].s[i];
            struct passive_state before = s;
            int got = 0;
            switch (st->op) {
            case AVAIL:
                got = passive_available(&s, &conf, st->t);
                CHECK(memcmp(&before, &s, sizeof s) == 0, "%s step %d: available changed the state",
                      scenarios[k].name, i);
                break;
            case PICK: got = passive_on_pick(&s, &conf, st->t); break;
            case FAIL: passive_on_failure(&s, &conf, st->t); got = st->want; break;
            case OK: got = passive_on_success(&s); break;
            default: break;
            }
            CHECK(got == st->want, "%s step %d (%s at %lld): got %d, want %d", scenarios[k].name, i,
                  op_name(st->op), (long long)st->t, got, st->want);
            if (st->circuit >= 0)
                CHECK((int)s.circuit == st->circuit, "%s step %d (%s): circuit %d, want %d",
                      scenarios[k].name, i, op_name(st->op), (int)s.circuit, st->circuit);
            /* on_pick and on_success report a change exactly when the state changed */
            if (st->op == PICK || st->op == OK)
                CHECK(got == (memcmp(&before, &s, sizeof s) != 0),
                      "%s step %d (%s): returned %d but state %s", scenarios[k].name, i, op_name(st->op),
                      got, memcmp(&before, &s, sizeof s) ? "changed" : "unchanged");
        }
    }

    /* field-level checks after each transition */
    {
        struct passive_state s;
        memset(&s, 0, sizeof s);
        passive_on_failure(&s, &conf, 1000);
        CHECK_INT(s.failures, 1, "failures after one");
        CHECK_INT(s.ban_until_ms, 16000, "ban_until after one");
        passive_on_failure(&s, &conf, 2000);
        passive_on_failure(&s, &conf, 3000);
        CHECK_INT(s.circuit, CIRCUIT_OPEN, "open after three");
        CHECK_INT(s.open_until_ms, 33000, "open_until = now + circuit_open_ms");
        CHECK_INT(s.trials, 0, "no trials while open");
        CHECK_INT(passive_on_pick(&s, &conf, 33000), 1, "first trial");
        CHECK_INT(s.circuit, CIRCUIT_HALF_OPEN, "half-open");
        CHECK_INT(s.trials, 1, "trials counted");
        CHECK_INT(passive_on_pick(&s, &conf, 33001), 1, "second trial");
        CHECK_INT(s.trials, 2, "trials counted");
        CHECK_INT(passive_on_pick(&s, &conf, 33002), -1, "every trial out");
        CHECK_INT(passive_on_unused(&s), 1, "an unused trial goes back");
        CHECK_INT(s.trials, 1, "one trial out");
        CHECK_INT(s.circuit, CIRCUIT_HALF_OPEN, "still half-open");
        CHECK_INT(passive_on_pick(&s, &conf, 33003), 1, "the trial given back is handed out again");
        CHECK_INT(s.trials, 2, "trials counted");
        CHECK_INT(passive_on_success(&s), 1, "success changes");
        CHECK_INT(s.circuit, CIRCUIT_CLOSED, "closed");
        CHECK_INT(s.failures, 0, "failures cleared");
        CHECK_INT(s.trials, 0, "trials cleared");
        CHECK_INT(s.ban_until_ms, 0, "ban cleared");
        CHECK_INT(s.open_until_ms, 0, "open cleared");
        CHECK_INT(passive_on_success(&s), 0, "second success changes nothing");
    }

    /* half_open_trials = 0: an open circuit never hands out a trial */
    {
        struct passive_conf c0 = conf;
        c0.half_open_trials = 0;
        struct passive_state s;
        memset(&s, 0, sizeof s);
        for (int i = 0; i < 3; i++)
            passive_on_failure(&s, &c0, 0);
        CHECK_INT(passive_available(&s, &c0, 10 * 60 * 1000), 0, "no trials configured");
    }


    /* issue 19: news of a replica from another host */
    {
        struct passive_conf nc = {15000, 3, 3000, 1};
        struct passive_state here = {0}, there = {0};
        struct passive_news n, back;
        char line[128];
        passive_on_failure(&there, &nc, 1000);
        passive_news_of(&there, 1, 1500, &n);
        CHECK(n.failed && n.ban_left_ms == 14500 && n.circuit == CIRCUIT_CLOSED && n.failures == 1, "news of a ban");
        CHECK(passive_news_format(&n, line, sizeof line) > 0 && passive_news_parse(line, &back) == 0 &&
              back.failed && back.ban_left_ms == 14500 && back.failures == 1, "a ban's news round-trips: %s", line);
        CHECK(passive_on_news(&here, &back, 50000) == 1 && here.ban_until_ms == 64500 && !passive_available(&here, &nc, 60000) &&
              passive_available(&here, &nc, 64500), "a ban there lasts as long here, on this host's clock");
        CHECK(passive_on_news(&here, &back, 40000) == 0 && here.ban_until_ms == 64500, "an older ban changes nothing");
        passive_on_failure(&there, &nc, 2000);
        passive_on_failure(&there, &nc, 3000);
        passive_news_of(&there, 1, 3000, &n);
        CHECK(n.circuit == CIRCUIT_OPEN && n.open_left_ms == 3000, "news of an open circuit");
        CHECK(passive_on_news(&here, &n, 70000) == 1 && here.circuit == CIRCUIT_OPEN && here.open_until_ms == 73000 &&
              here.failures == 3 && !passive_available(&here, &nc, 72000), "an open circuit there is open here");
        struct passive_news ok;
        CHECK(passive_news_parse("ok", &ok) == 0 && !ok.failed, "news of a success");
        CHECK(passive_on_news(&here, &ok, 71000) == 1 && here.circuit == CIRCUIT_CLOSED && here.ban_until_ms == 0 &&
              passive_available(&here, &nc, 71000), "a success there closes it here");
        const char *bad[] = {"", "fail", "fail 1 2 3", "fail -1 0 0 1", "fail 1 9 0 1", "fail 1 0 0 1 x",
                             "fail 999999999999 0 0 1", "okay"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            CHECK(passive_news_parse(bad[i], &back) == -1, "not news: \"%s\"", bad[i]);
    }
    return check_done();
}
