/* fuzz_conf.c: the sluice.conf parser (lib/conf.c, libconfig syntax, R-DEP-5) on any text.
 *
 * Invariants: loading either succeeds or fails, never crashes or leaks; every string
 * option stays NUL-terminated inside its field; after a success every number is
 * inside the range conf.c documents (a sample of them is checked); loading the same
 * text twice gives the same struct. */
#include "fuzz.h"

#include "conf.h"

#include <unistd.h>

#define STR_OK(field) (memchr((field), '\0', sizeof(field)) != NULL)

/* libconfig 1.5 (Debian 12) itself leaks a string token's buffer when a string stands
 * where its grammar wants none (`""` alone; config_destroy cannot free it): its
 * scanner's allocations are not sluice's leaks. LeakSanitizer reads this list. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libconfig_yylex\nleak:strbuf_append\n";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *text = fuzz_cstr(data, size);
    /* @include would read other files: the text is judged alone. */
    if (strstr(text, "@include")) {
        free(text);
        return 0;
    }
    struct conf c, again;
    conf_defaults(&c);
    int rc = conf_load_string(&c, text, "fuzz.conf");
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    FUZZ_CHECK(STR_OK(c.database) && STR_OK(c.state_file) && STR_OK(c.log_file) && STR_OK(c.access_log) &&
                   STR_OK(c.billing_tz) && STR_OK(c.health_log_file),
               "a string option overran its field");
    if (rc == 0) {
        FUZZ_CHECK(c.pool_processes >= 1 && c.pool_processes <= 64, "pool.processes %d", c.pool_processes);
        FUZZ_CHECK(c.pool_threads >= 1 && c.pool_threads <= 4096, "pool.threads %d", c.pool_threads);
        FUZZ_CHECK(c.max_body_bytes >= 1024 && c.max_body_bytes <= (1LL << 32), "max_body_bytes %lld",
                   (long long)c.max_body_bytes);
        FUZZ_CHECK(c.max_sse_event_bytes >= 1024 && c.max_sse_event_bytes <= (1LL << 30),
                   "max_sse_event_bytes %lld", (long long)c.max_sse_event_bytes);
        FUZZ_CHECK(c.keepalive_ms >= 1000 && c.keepalive_ms <= 600000, "keepalive_ms %d", c.keepalive_ms);
        FUZZ_CHECK(c.config_poll_ms >= 10 && c.config_poll_ms <= 2000, "config.poll_ms %d", c.config_poll_ms);
        FUZZ_CHECK(c.idem_ttl_minutes >= 1 && c.idem_ttl_minutes <= 1440, "idempotency.ttl_minutes %d",
                   c.idem_ttl_minutes);
        FUZZ_CHECK(c.idem_max_bytes >= 0 && c.idem_max_bytes <= (1LL << 40), "idempotency.max_bytes %lld",
                   (long long)c.idem_max_bytes);
        FUZZ_CHECK(c.affinity_max_entries >= 64 && c.affinity_max_entries <= 100000, "affinity.max_entries %d",
                   c.affinity_max_entries);
        FUZZ_CHECK(c.default_max_output >= 1 && c.default_max_output <= 10000000, "keys.default_max_output %lld",
                   (long long)c.default_max_output);
    }
    conf_defaults(&again);
    int rc2 = conf_load_string(&again, text, "fuzz.conf");
    FUZZ_CHECK(rc2 == rc && memcmp(&c, &again, sizeof c) == 0, "the same text loaded differently");
    free(text);
    return 0;
}
