/* test_kstate.c: the pure parts of the key-limit state (issue 19): the `state`
 * option's URL (lib/state_url.h), the fail policy, outages and the reconnect backoff
 * (lib/kstate.h). */
#include "check.h"

#include "kstate.h"
#include "state_url.h"

#include <string.h>

int main(void)
{
    static const struct {
        const char *in;
        int ok, unix_socket, port, db;
        const char *where, *password, *why;
    } cases[] = {
        {"redis://127.0.0.1:6379/0", 1, 0, 6379, 0, "127.0.0.1", "", NULL},
        {"redis://localhost", 1, 0, 6379, 0, "localhost", "", NULL},
        {"redis://redis.internal:7000/3", 1, 0, 7000, 3, "redis.internal", "", NULL},
        {"redis://h/", 1, 0, 6379, 0, "h", "", NULL},
        {"redis://:s3cret@h:6380/2", 1, 0, 6380, 2, "h", "s3cret", NULL},
        {"redis://user:pw@h", 1, 0, 6379, 0, "h", "pw", NULL},
        {"redis://[::1]:6379/1", 1, 0, 6379, 1, "::1", "", NULL},
        {"redis+unix:///run/redis/redis.sock", 1, 1, 6379, 0, "/run/redis/redis.sock", "", NULL},
        {"redis+unix:///tmp/r.sock?db=5", 1, 1, 6379, 5, "/tmp/r.sock", "", NULL},
        {"redis+unix://:pw@/tmp/r.sock?db=1", 1, 1, 6379, 1, "/tmp/r.sock", "pw", NULL},
        {"", 0, 0, 0, 0, NULL, NULL, "empty"},
        {"http://h:6379", 0, 0, 0, 0, NULL, NULL, "redis://"},
        {"redis://", 0, 0, 0, 0, NULL, NULL, "host"},
        {"redis://:6379", 0, 0, 0, 0, NULL, NULL, "host"},
        {"redis://h:0", 0, 0, 0, 0, NULL, NULL, "port"},
        {"redis://h:65536", 0, 0, 0, 0, NULL, NULL, "port"},
        {"redis://h:63a", 0, 0, 0, 0, NULL, NULL, "port"},
        {"redis://h/1024", 0, 0, 0, 0, NULL, NULL, "database"},
        {"redis://h/x", 0, 0, 0, 0, NULL, NULL, "database"},
        {"redis://pw@h", 0, 0, 0, 0, NULL, NULL, "PASSWORD"},
        {"redis://[::1:6379", 0, 0, 0, 0, NULL, NULL, "]"},
        {"redis+unix://tmp/r.sock", 0, 0, 0, 0, NULL, NULL, "absolute"},
        {"redis+unix:///tmp/r.sock?database=1", 0, 0, 0, 0, NULL, NULL, "?db="},
        {"redis+unix:///tmp/r.sock?db=9999", 0, 0, 0, 0, NULL, NULL, "?db="},
        {"redis://h :1", 0, 0, 0, 0, NULL, NULL, "spaces"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct state_url u;
        char why[160] = "";
        int rc = state_url_parse(cases[i].in, &u, why, sizeof why);
        CHECK_INT(rc == 0, cases[i].ok, cases[i].in);
        if (rc == 0 && cases[i].ok) {
            CHECK_INT(u.unix_socket, cases[i].unix_socket, cases[i].in);
            const char *where = u.unix_socket ? u.path : u.host, *pw = u.password;
            CHECK_STR(where, cases[i].where, cases[i].in);
            CHECK_INT(u.port, cases[i].port, cases[i].in);
            CHECK_INT(u.db, cases[i].db, cases[i].in);
            CHECK_STR(pw, cases[i].password, cases[i].in);
        } else if (!cases[i].ok) {
            CHECK(strstr(why, cases[i].why) != NULL, "%s: why \"%s\" lacks \"%s\"", cases[i].in, why, cases[i].why);
        }
    }
    /* The description for logs never carries the password. */
    struct state_url u;
    char buf[300];
    const char *text = buf;
    CHECK_INT(state_url_parse("redis://:topsecret@h:6380/2", &u, NULL, 0), 0, "parse");
    state_url_describe(&u, buf, sizeof buf);
    CHECK_STR(text, "redis://h:6380/2", "describe tcp");
    CHECK(strstr(text, "topsecret") == NULL, "password in %s", text);
    CHECK_INT(state_url_parse("redis+unix://:topsecret@/r.sock?db=3", &u, NULL, 0), 0, "parse unix");
    state_url_describe(&u, buf, sizeof buf);
    CHECK_STR(text, "redis+unix:///r.sock?db=3", "describe unix");
    CHECK_INT(state_url_parse("redis://[::1]:7000/1", &u, NULL, 0), 0, "parse v6");
    state_url_describe(&u, buf, sizeof buf);
    CHECK_STR(text, "redis://[::1]:7000/1", "describe v6");

    /* The fail policy: fail_open admits, fail_closed refuses; the metric's labels. */
    CHECK_INT(kstate_fail_admits(0), 1, "fail_open admits");
    CHECK_INT(kstate_fail_admits(1), 0, "fail_closed refuses");
    CHECK_STR(kstate_policy_name(0), "fail_open", "label open");
    CHECK_STR(kstate_policy_name(1), "fail_closed", "label closed");

    /* An outage is logged once: at its first failure, and its end once. */
    struct kstate_outage o = {0};
    CHECK_INT(kstate_outage_note(&o, 1, 1000), 0, "ok while up");
    CHECK_INT(kstate_outage_note(&o, 0, 2000), 1, "first failure starts it");
    CHECK_INT(kstate_outage_note(&o, 0, 2100), 0, "second failure: no log");
    CHECK_INT(kstate_outage_note(&o, 0, 2200), 0, "third failure: no log");
    CHECK_INT((int)o.failures, 3, "failures counted");
    CHECK_INT((int)o.since_ms, 2000, "since");
    CHECK_INT(kstate_outage_note(&o, 1, 3000), 2, "success ends it");
    CHECK_INT(kstate_outage_note(&o, 1, 3100), 0, "ok again");
    CHECK_INT(kstate_outage_note(&o, 0, 4000), 1, "a second outage is logged again");

    /* Reconnect backoff: none, then 100 ms doubling to 2 s. */
    CHECK_INT((int)kstate_backoff_ms(0), 0, "no failure");
    CHECK_INT((int)kstate_backoff_ms(1), 100, "first");
    CHECK_INT((int)kstate_backoff_ms(2), 200, "second");
    CHECK_INT((int)kstate_backoff_ms(5), 1600, "fifth");
    CHECK_INT((int)kstate_backoff_ms(6), 2000, "capped");
    CHECK_INT((int)kstate_backoff_ms(1000), 2000, "still capped");
    return check_done();
}
