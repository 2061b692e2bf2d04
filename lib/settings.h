/* settings.h: the run-time settings schema (SPEC §0 "settings"): one row per setting with
 * its type, range or allowed values, default and meaning. Every program reads it:
 * sluicectl settings|config, the admin API's /api/v1/system/inference-config and the
 * data plane's snapshot. Values are stored as text in table `settings`. */
#ifndef SLUICE_SETTINGS_H
#define SLUICE_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

enum settings_type {
    SETTINGS_BOOL,     /* true|false (on|off and 1|0 are read too) */
    SETTINGS_ENUM,     /* one of values[] */
    SETTINGS_INT,      /* a whole number in [min, max] */
    SETTINGS_NUMBER,   /* a decimal number in [min, max] with at most `decimals` places */
    SETTINGS_TEXT,     /* at most max bytes without control characters; may be empty */
};

/* One setting; the rows are documented field by field in settings.c. */
struct settings_def {
    const char *name;
    enum settings_type type;
    const char *const *values;   /* ENUM: the allowed words, NULL-terminated */
    int64_t min, max;            /* INT, NUMBER: inclusive range; TEXT: max = longest in bytes */
    int decimals;                /* NUMBER: most digits after the point */
    const char *def;             /* the value while no row is stored, as stored text */
    const char *meaning;         /* one line (README, help) */
};

/* A parsed value. It points into the text it was parsed from (TEXT) or into the
 * table (ENUM), so it lives as long as those do. */
struct settings_value {
    int64_t i;          /* BOOL 0|1; ENUM the index in values[]; INT the number */
    double num;         /* NUMBER the number (rounded to its decimals); INT the number too */
    const char *text;   /* ENUM the word; TEXT the text */
};

extern const struct settings_def settings_defs[];   /* in config get's order */
extern const size_t settings_count;

/* The row of name, or NULL for an unknown setting. */
const struct settings_def *settings_find(const char *name);

/* Parses a stored or typed text. 0, or -1 with msg set to "<name> must be ..." naming
 * the allowed range or values (never the text itself). */
int settings_parse(const struct settings_def *d, const char *text, struct settings_value *v,
                   char *msg, size_t msglen);

/* The default as a value (every row's default parses: tests/unit/test_settings.c). */
void settings_default(const struct settings_def *d, struct settings_value *v);

/* The stored text as a value; NULL (no row) or a text that no longer parses gives the
 * default. Returns 0 when the text was used, 1 for the default of a missing row, -1 for
 * the default replacing a bad text. */
int settings_read(const struct settings_def *d, const char *stored, struct settings_value *v);
/* settings_read, and a warning naming the key the first time this process meets a bad
 * stored text of it (again only after a good text, or another bad one). */
int settings_read_warn(const struct settings_def *d, const char *stored, struct settings_value *v);

/* The canonical text of v, as sluicectl and the API store it: true|false, 85, 85.5,
 * the word or the text. Truncated to n - 1 bytes (TEXT needs max + 1). */
void settings_format(const struct settings_def *d, const struct settings_value *v, char *out,
                     size_t n);

/* "true or false", "one of: a, b", "a whole number from 0 to 100", ... */
void settings_describe(const struct settings_def *d, char *out, size_t n);

/* Every name, comma-separated, for "unknown setting" messages. */
void settings_names(char *out, size_t n);

#endif
