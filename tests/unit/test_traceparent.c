/* test_traceparent.c: W3C trace context parsing and formatting (fcgi/traceparent.c). */
#include "check.h"
#include "traceparent.h"

#include <stdio.h>
#include <string.h>

#define TID "0af7651916cd43dd8448eb211c80319c"
#define SID "b7ad6b7169203331"

static void test_parse(void)
{
    static const struct { const char *value; int ok, flags; } cases[] = {
        {"00-" TID "-" SID "-01", 1, 0x01},                         /* the spec's example */
        {"00-" TID "-" SID "-00", 1, 0x00},                         /* not sampled */
        {"00-" TID "-" SID "-09", 1, 0x09},                         /* unknown flags are read, not refused */
        {"00-" TID "-" SID "-ff", 1, 0xff},
        {"01-" TID "-" SID "-01", 1, 0x01},                         /* a later version, same fields */
        {"cc-" TID "-" SID "-01-what-the-future-holds", 1, 0x01},   /* ... with fields appended */
        {"cc-" TID "-" SID "-01-", 1, 0x01},
        {"cc-" TID "-" SID "-01x", 0, 0},                           /* appended, but not after a '-' */
        {"00-" TID "-" SID "-01-extra", 0, 0},                      /* version 00 is exactly 55 bytes */
        {"ff-" TID "-" SID "-01", 0, 0},                            /* version 255 is forbidden */
        {"0g-" TID "-" SID "-01", 0, 0},
        {"0A-" TID "-" SID "-01", 0, 0},
        {"00-0AF7651916CD43DD8448EB211C80319C-" SID "-01", 0, 0},   /* uppercase hex is invalid */
        {"00-" TID "-B7AD6B7169203331-01", 0, 0},
        {"00-" TID "-" SID "-0A", 0, 0},
        {"00-00000000000000000000000000000000-" SID "-01", 0, 0},   /* all-zero trace id */
        {"00-" TID "-0000000000000000-01", 0, 0},                   /* all-zero span id */
        {"00-" TID "-" SID "-1", 0, 0},                             /* wrong lengths */
        {"00-" TID "-" SID "-001", 0, 0},
        {"00-0af7651916cd43dd8448eb211c80319-" SID "-01", 0, 0},
        {"00-0af7651916cd43dd8448eb211c80319cc-b7ad6b716920333-01", 0, 0},
        {"00-" TID "-b7ad6b71692033311-01", 0, 0},
        {"0-" TID "-" SID "-01", 0, 0},
        {"000-" TID "-" SID "-01", 0, 0},
        {"00_" TID "-" SID "-01", 0, 0},                            /* separators */
        {"00-" TID "_" SID "-01", 0, 0},
        {"00-" TID "-" SID "_01", 0, 0},
        {"00-" TID "-zzad6b7169203331-01", 0, 0},                   /* bad hex */
        {" 00-" TID "-" SID "-01", 0, 0},
        {"", 0, 0},
        {NULL, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char tid[33] = "", sid[17] = "";
        int flags = -1;
        int rc = traceparent_parse(cases[i].value, tid, sid, &flags);
        const char *v = cases[i].value ? cases[i].value : "(null)";
        CHECK(rc == (cases[i].ok ? 0 : -1), "case %zu: %s: rc %d", i, v, rc);
        if (cases[i].ok && rc == 0) {
            const char *t = tid, *s = sid;
            CHECK_STR(t, TID, v);
            CHECK_STR(s, SID, v);
            CHECK_INT(flags, cases[i].flags, v);
        }
    }
}

static void test_format(void)
{
    char out[56];
    traceparent_format(out, TID, SID, 1);
    const char *got = out;
    CHECK_STR(got, "00-" TID "-" SID "-01", "format");
    traceparent_format(out, TID, SID, 0);
    CHECK_STR(got, "00-" TID "-" SID "-00", "format, not sampled");
    /* what is formatted parses back */
    char tid[33], sid[17];
    int flags = 0;
    CHECK(traceparent_parse(out, tid, sid, &flags) == 0, "round trip of %s", out);
    /* the same bytes as the snprintf it replaced, for any flags and lengths (cut at 55) */
    static const char *const ids[] = {"", "a", TID, TID TID};
    for (int t = 0; t < 4; t++)
        for (int s = 0; s < 4; s++)
            for (int f = 0; f < 0x200; f += 0x51) {
                char want[56];
                snprintf(want, sizeof want, "00-%s-%s-%02x", ids[t], ids[s], f & 0xff);
                traceparent_format(out, ids[t], ids[s], f);
                CHECK(strcmp(out, want) == 0, "format of %d %d %x: %s, not %s", t, s, f, out, want);
            }
}

int main(void)
{
    test_parse();
    test_format();
    return check_done();
}
