/* test_log.c: the collapsing of repeated log lines (lib/log.c): the per-site
 * decision, and what reaches the file from one site, many sites, many threads. */
#include "check.h"
#include "log.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char path[] = "/tmp/sluice-test-log-XXXXXX";

static char *file_text(void)
{
    static char text[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    return text;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_site_admit(void)
{
    struct log_site s = {0};
    uint32_t rep = 99;
    CHECK(log_site_admit(&s, 1000, 1000, &rep) == 1 && rep == 0, "the first line is written");
    CHECK(log_site_admit(&s, 1001, 1000, &rep) == 0, "a repeat inside the window is counted");
    CHECK(log_site_admit(&s, 1999, 1000, &rep) == 0, "still inside the window");
    CHECK_INT(s.suppressed, 2, "counted");
    CHECK(log_site_admit(&s, 2000, 1000, &rep) == 1, "the window has passed");
    CHECK_INT(rep, 2, "the summary covers the counted lines");
    CHECK_INT(s.suppressed, 0, "the count starts again");
    CHECK(log_site_admit(&s, 2500, 1000, &rep) == 0, "a new window started at 2000");
    CHECK(log_site_admit(&s, 9000, 0, &rep) == 1 && rep == 1, "window 0 writes everything");
}

static void warn_from_one_site(int i) { log_warn("replica %d failed: connection refused", i); }
static void request_fails(int i) { log_warn("request r%d: replica 3 failed: timeout", i); }

static void test_one_site(void)
{
    for (int i = 0; i < 10; i++)
        warn_from_one_site(7);
    char *t = file_text();
    CHECK_INT(count_of(t, "failed: connection refused"), 1, "ten repeats in the window: one line");
    pause_ms(80);
    warn_from_one_site(10);
    t = file_text();
    CHECK_INT(count_of(t, "last message repeated 9 times"), 1, "the summary of the nine counted lines");
    CHECK(strstr(t, "replica 10 failed") && strstr(t, "repeated 9 times") < strstr(t, "replica 10 failed"),
          "the summary comes before the next line: %s", t);
    CHECK(strstr(t, "WARN test_log.c:") != NULL, "the summary names the call site: %s", t);
}

/* Identical means the same text: other replicas' failures from the same line
 * are news, the same failure of another request is a repeat. */
static void test_identical_text(void)
{
    pause_ms(80);
    log_flush_repeats(1);
    for (int i = 0; i < 3; i++)
        warn_from_one_site(100 + i);
    char *t = file_text();
    CHECK_INT(count_of(t, "replica 10"), 4, "three replicas' failures: three lines (and replica 10's)");
    for (int i = 0; i < 5; i++)
        request_fails(i);
    t = file_text();
    CHECK_INT(count_of(t, "replica 3 failed: timeout"), 1, "five requests failing alike: one line");
}

static void test_other_line_flushes(void)
{
    for (int i = 0; i < 4; i++)
        log_error("database locked (%s)", "busy");
    log_info("something else happened inside the window");
    char *t = file_text();
    CHECK_INT(count_of(t, "database locked"), 1, "inside its window the site keeps counting");
    pause_ms(80);
    log_info("something else happened after it");
    t = file_text();
    CHECK_INT(count_of(t, "database locked"), 2, "one line, then the summary naming the template");
    CHECK_INT(count_of(t, "last message repeated 3 times"), 1, "a different line after the window writes the count");
    CHECK(strstr(t, "repeated 3 times") < strstr(t, "happened after it"), "the count comes first: %s", t);
    for (int i = 0; i < 5; i++)
        log_info("info lines are events, never collapsed");
    CHECK_INT(count_of(file_text(), "info lines are events"), 5, "INFO always written");
}

static void test_flush(void)
{
    for (int i = 0; i < 3; i++)
        log_warn("flushed site");
    log_flush_repeats(0);
    CHECK_INT(count_of(file_text(), "repeated 2 times (\"flushed site\")"), 0, "the window is still open");
    log_flush_repeats(1);
    CHECK_INT(count_of(file_text(), "last message repeated 2 times (\"flushed site\")"), 1, "log_flush_repeats");
}

static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++)
        log_warn("threaded repeat");
    return NULL;
}

static void test_threads(void)
{
    log_set_repeat_window_ms(60000);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, hammer, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    log_flush_repeats(1);
    char *txt = file_text();
    CHECK_INT(count_of(txt, ": threaded repeat\n"), 1, "8000 lines from 4 threads: one written");
    CHECK(count_of(txt, "last message repeated 7999 times") == 1, "and every other one counted: %s", txt);
}

int main(void)
{
    int fd = mkstemp(path);
    if (fd < 0)
        return 1;
    close(fd);
    test_site_admit();
    if (log_open(path, "test") != 0)
        return 1;
    log_set_repeat_window_ms(50);
    test_one_site();
    test_other_line_flushes();
    test_identical_text();
    test_flush();
    test_threads();
    unlink(path);
    return check_done();
}
