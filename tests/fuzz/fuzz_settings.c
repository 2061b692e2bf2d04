/* fuzz_settings.c: the settings schema parser (lib/settings.c) on stored or typed texts:
 * what `sluicectl settings set`, the admin API and the snapshot read.
 *
 * Every row of the table parses the input. Invariants: a failure leaves exactly the
 * message "<name> must be <rule>" (it never echoes the text) and reads as the default; a success round-trips (its
 * canonical text parses to the same value, and that text is canonical again);
 * settings_read gives the parsed value or the default, as documented; formatting
 * into buffers of any size stays inside them and NUL-terminated. */
#include "fuzz.h"

#include "log.h"
#include "settings.h"

static int same_value(const struct settings_def *d, const struct settings_value *a, const struct settings_value *b)
{
    switch (d->type) {
    case SETTINGS_BOOL:
    case SETTINGS_ENUM:
    case SETTINGS_INT:
        return a->i == b->i;
    case SETTINGS_NUMBER:
        return a->num == b->num;
    case SETTINGS_TEXT:
        return strcmp(a->text, b->text) == 0;
    }
    return 0;
}

static void check_row(const struct settings_def *d, const char *text)
{
    struct settings_value v, v2, r;
    char msg[512], out[8192], out2[8192];
    memset(msg, 'x', sizeof msg);
    int rc = settings_parse(d, text, &v, msg, sizeof msg);
    FUZZ_CHECK(rc == 0 || rc == -1, "%s: returned %d", d->name, rc);
    if (rc != 0) {
        FUZZ_CHECK(memchr(msg, '\0', sizeof msg), "%s: message not terminated", d->name);
        char allowed[256], want[512];
        settings_describe(d, allowed, sizeof allowed);
        snprintf(want, sizeof want, "%s must be %s", d->name, allowed);
        FUZZ_CHECK(strcmp(msg, want) == 0, "%s: message \"%s\" (it may only name the rule)", d->name, msg);
        FUZZ_CHECK(settings_read(d, text, &r) == -1, "%s: read took a text parse refused", d->name);
        struct settings_value def;
        settings_default(d, &def);
        FUZZ_CHECK(same_value(d, &r, &def), "%s: a bad text did not give the default", d->name);
        return;
    }
    if (d->type == SETTINGS_INT)
        FUZZ_CHECK(v.i >= d->min && v.i <= d->max, "%s: %lld outside the range", d->name, (long long)v.i);
    if (d->type == SETTINGS_NUMBER)
        FUZZ_CHECK(v.num >= (double)d->min && v.num <= (double)d->max, "%s: %g outside the range", d->name, v.num);
    if (d->type == SETTINGS_BOOL)
        FUZZ_CHECK(v.i == 0 || v.i == 1, "%s: bool %lld", d->name, (long long)v.i);
    if (d->type == SETTINGS_TEXT)
        FUZZ_CHECK(v.text == text && strlen(text) <= (size_t)d->max, "%s: text", d->name);
    settings_format(d, &v, out, sizeof out);
    FUZZ_CHECK(settings_parse(d, out, &v2, NULL, 0) == 0, "%s: canonical text %s of %s does not parse", d->name,
               out, text);
    FUZZ_CHECK(same_value(d, &v, &v2), "%s: %s -> %s is another value", d->name, text, out);
    settings_format(d, &v2, out2, sizeof out2);
    FUZZ_CHECK(strcmp(out, out2) == 0, "%s: canonical text %s is not stable (%s)", d->name, out, out2);
    FUZZ_CHECK(settings_read(d, text, &r) == 0 && same_value(d, &r, &v), "%s: read differs from parse", d->name);
    FUZZ_CHECK(settings_read_warn(d, text, &r) == 0 && same_value(d, &r, &v), "%s: read_warn differs", d->name);
    /* Truncation: a buffer of n bytes holds at most n - 1 and a NUL. */
    for (size_t n = 1; n <= 8; n++) {
        char small[9];
        memset(small, 'z', sizeof small);
        settings_format(d, &v, small, n);
        FUZZ_CHECK(memchr(small, '\0', n), "%s: format(%zu) not terminated", d->name, n);
        FUZZ_CHECK(small[n] == 'z', "%s: format(%zu) wrote past the buffer", d->name, n);
        FUZZ_CHECK(strncmp(small, out, n - 1) == 0, "%s: format(%zu) is not a prefix", d->name, n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        log_set_level(LOG_ERROR);   /* settings_read_warn's warnings are expected here */
        quiet = 1;
    }
    if (size > 1 << 14)
        return 0;
    char *text = fuzz_cstr(data, size);
    for (size_t i = 0; i < settings_count; i++)
        check_row(&settings_defs[i], text);
    const struct settings_def *d = settings_find(text);
    if (d)
        FUZZ_CHECK(strcmp(d->name, text) == 0, "find(%s) gave %s", text, d->name);
    char names[2048], desc[256];
    settings_names(names, sizeof names);
    FUZZ_CHECK(memchr(names, '\0', sizeof names), "names not terminated");
    for (size_t i = 0; i < settings_count; i++) {
        settings_describe(&settings_defs[i], desc, sizeof desc);
        FUZZ_CHECK(memchr(desc, '\0', sizeof desc), "describe not terminated");
    }
    free(text);
    return 0;
}
