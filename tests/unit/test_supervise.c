/* test_supervise.c: sluice-fcgi --listen's pure parts (fcgi/supervise.h): the listen
 * address, and the wait before a responder that died is started again. */
#include "check.h"

#include "supervise.h"

#include <string.h>

int main(void)
{
    static const struct {
        const char *in;
        int ok, unix_socket, port;
        const char *where, *why;
    } cases[] = {
        {"unix:/run/sluice/sluice-fcgi.sock", 1, 1, 0, "/run/sluice/sluice-fcgi.sock", NULL},
        {"127.0.0.1:9000", 1, 0, 9000, "127.0.0.1", NULL},
        {"127.0.0.2:1", 1, 0, 1, "127.0.0.2", NULL},
        {"127.0.0.1:65535", 1, 0, 65535, "127.0.0.1", NULL},
        {"unix:relative.sock", 0, 0, 0, NULL, "absolute"},
        {"unix:", 0, 0, 0, NULL, "absolute"},
        {"0.0.0.0:9000", 0, 0, 0, NULL, "loopback"},
        {"10.1.2.3:9000", 0, 0, 0, NULL, "loopback"},
        {"localhost:9000", 0, 0, 0, NULL, "IPv4"},
        {"127.0.0.1:0", 0, 0, 0, NULL, "1-65535"},
        {"127.0.0.1:65536", 0, 0, 0, NULL, "1-65535"},
        {"127.0.0.1:90a", 0, 0, 0, NULL, "unix:PATH"},
        {"127.0.0.1:", 0, 0, 0, NULL, "unix:PATH"},
        {":9000", 0, 0, 0, NULL, "unix:PATH"},
        {"9000", 0, 0, 0, NULL, "unix:PATH"},
        {"", 0, 0, 0, NULL, "unix:PATH"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct listen_addr a;
        const char *why = NULL;
        int rc = listen_parse(cases[i].in, &a, &why);
        CHECK_INT(rc == 0, cases[i].ok, cases[i].in);
        if (cases[i].ok) {
            CHECK_INT(a.unix_socket, cases[i].unix_socket, cases[i].in);
            CHECK_STR(a.unix_socket ? a.path : a.host, cases[i].where, cases[i].in);
            CHECK_INT(a.port, cases[i].port, cases[i].in);
        } else {
            CHECK(why && strstr(why, cases[i].why), "%s: why \"%s\" lacks \"%s\"", cases[i].in, why ? why : "",
                  cases[i].why);
        }
    }
    char longpath[200] = "unix:/";
    memset(longpath + 6, 'a', 150);
    struct listen_addr a;
    const char *why;
    CHECK_INT(listen_parse(longpath, &a, &why), -1, "a path longer than sun_path");

    /* a long run: at once; quick deaths: 100, 200, 400 ... ms, never above 10 s */
    CHECK_INT(respawn_delay_ms(60000, 0), 0, "after a long run");
    CHECK_INT(respawn_delay_ms(60000, 5), 0, "a long run resets");
    CHECK_INT(respawn_delay_ms(500, 1), 100, "first quick death");
    CHECK_INT(respawn_delay_ms(500, 2), 200, "second");
    CHECK_INT(respawn_delay_ms(500, 3), 400, "third");
    CHECK_INT(respawn_delay_ms(500, 8), 10000, "capped");
    CHECK_INT(respawn_delay_ms(500, 1000), 10000, "still capped");
    return check_done();
}
