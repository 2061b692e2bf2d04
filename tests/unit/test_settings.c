/* test_settings.c: the run-time settings schema (lib/settings.h): every row's default,
 * ranges, enums, bools, numbers with decimals, texts, bad values and their messages. */
#include "check.h"

#include "settings.h"

#include <stdint.h>
#include <string.h>

/* CHECK_STR for char arrays (never NULL). */
#define CHECK_BUF(got, want, what)                                             \
    CHECK(strcmp((got), (want)) == 0, "%s: expected \"%s\", got \"%s\"", (what), (want), (got))

/* text -> canonical stored form ("" = refused); TEXT rows are in text_cases. */
static const struct {
    const char *name, *text, *canon;
} parse_cases[] = {
    /* BOOL: true|false, and on|off, 1|0 as read */
    {"auto_routing_enabled", "true", "true"},
    {"auto_routing_enabled", "false", "false"},
    {"auto_routing_enabled", "on", "true"},
    {"auto_routing_enabled", "off", "false"},
    {"auto_routing_enabled", "1", "true"},
    {"auto_routing_enabled", "0", "false"},
    {"auto_routing_enabled", "yes", ""},
    {"auto_routing_enabled", "TRUE", ""},
    {"auto_routing_enabled", "", ""},
    {"auto_routing_enabled", " true", ""},
    /* ENUM */
    {"auto_routing_strategy", "balanced", "balanced"},
    {"auto_routing_strategy", "cost", "cost"},
    {"auto_routing_strategy", "latency", "latency"},
    {"auto_routing_strategy", "semantic", "semantic"},
    {"auto_routing_strategy", "cheap", ""},
    {"auto_routing_strategy", "Cost", ""},
    {"auto_routing_strategy", "", ""},
    {"response_model", "client", "client"},
    {"response_model", "upstream", "upstream"},
    {"response_model", "target", ""},
    /* INT: whole numbers in range */
    {"auto_routing_weight_quality", "0", "0"},
    {"auto_routing_weight_quality", "100", "100"},
    {"auto_routing_weight_quality", "007", "7"},
    {"auto_routing_weight_quality", "101", ""},
    {"auto_routing_weight_quality", "-1", ""},
    {"auto_routing_weight_quality", "50.5", ""},
    {"auto_routing_weight_price", "1e1", ""},
    {"auto_routing_weight_latency", "", ""},
    {"usage_retention_days", "1", "1"},
    {"usage_retention_days", "36500", "36500"},
    {"usage_retention_days", "0", ""},
    {"usage_retention_days", "36501", ""},
    {"usage_retention_days", "99999999999999999999", ""},
    /* NUMBER: degrees Celsius with one decimal */
    {"gpu_temperature_threshold", "85", "85"},
    {"gpu_temperature_threshold", "0", "0"},
    {"gpu_temperature_threshold", "150", "150"},
    {"gpu_temperature_threshold", "85.5", "85.5"},
    {"gpu_temperature_threshold", "85.0", "85"},
    {"gpu_temperature_threshold", "85.50", "85.5"},
    {"gpu_temperature_threshold", "070.1", "70.1"},
    {"gpu_temperature_threshold", "70.099999999999994", "70.1"},   /* a JSON double, %.17g */
    {"gpu_temperature_threshold", "149.9", "149.9"},
    {"gpu_temperature_threshold", "85.55", ""},
    {"gpu_temperature_threshold", "150.1", ""},
    {"gpu_temperature_threshold", "-0.1", ""},
    {"gpu_temperature_threshold", "-1", ""},
    {"gpu_temperature_threshold", "hot", ""},
    {"gpu_temperature_threshold", "", ""},
    {"gpu_temperature_threshold", "85.", ""},
    {"gpu_temperature_threshold", ".5", ""},
    {"gpu_temperature_threshold", "+85", ""},
    {"gpu_temperature_threshold", " 85", ""},
    {"gpu_temperature_threshold", "85 ", ""},
    {"gpu_temperature_threshold", "8.5e1", ""},
    {"gpu_temperature_threshold", "0x55", ""},
    {"gpu_temperature_threshold", "inf", ""},
    {"gpu_temperature_threshold", "nan", ""},
};

static const struct {
    const char *text;
    int ok;
} text_cases[] = {
    {"", 1},
    {"secret_field,other", 1},
    {"a, b c", 1},
    {"x'; DROP TABLE users; --", 1},
    {"\xc3\xbcn\xc3\xaf", 1},      /* UTF-8 passes (the admin checks it is valid) */
    {"a\nb", 0},
    {"a\tb", 0},
    {"a\x7f", 0},
};

/* The message of a refusal names the setting and what it takes. */
static const struct {
    const char *name, *text, *msg;
} msg_cases[] = {
    {"gpu_temperature_threshold", "hot",
     "gpu_temperature_threshold must be a number from 0 to 150 with at most 1 decimal"},
    {"auto_routing_enabled", "maybe", "auto_routing_enabled must be true or false"},
    {"auto_routing_strategy", "cheap",
     "auto_routing_strategy must be one of: balanced, cost, latency, semantic"},
    {"response_model", "x", "response_model must be one of: client, upstream"},
    {"auto_routing_weight_price", "101",
     "auto_routing_weight_price must be a whole number from 0 to 100"},
    {"usage_retention_days", "0", "usage_retention_days must be a whole number from 1 to 36500"},
    {"internal_fields", "a\nb",
     "internal_fields must be text of at most 4096 bytes without control characters"},
};

/* The default each program relies on, in canonical form. */
static const struct {
    const char *name, *def;
} default_cases[] = {
    {"auto_routing_enabled", "false"},
    {"auto_routing_strategy", "balanced"},
    {"auto_routing_weight_quality", "50"},
    {"auto_routing_weight_price", "30"},
    {"auto_routing_weight_latency", "20"},
    {"builtin_injection_rules", "false"},
    {"cors_allowed_origins", ""},
    {"gpu_temperature_threshold", "85"},
    {"internal_fields", ""},
    {"recovery_hint_failures", "5"},
    {"response_model", "client"},
    {"semantic_cache_audit_percent", "10"},
    {"semantic_cache_embedding_model", ""},
    {"semantic_cache_threshold", "0.95"},
    {"semantic_default_model", ""},
    {"semantic_embedding_model", ""},
    {"semantic_threshold", "0.1"},
    {"semantic_weight_bm25", "0.4"},
    {"semantic_weight_embedding", "0.6"},
    {"state_fail_policy", "fail_open"},
    {"state_lease_seconds", "10"},
    {"state_timeout_ms", "200"},
    {"usage_currency", "USD"},
    {"usage_retention_days", "90"},
};

static void test_every_row(void)
{
    CHECK(settings_count >= 9, "%zu rows", settings_count);
    for (size_t i = 0; i < settings_count; i++) {
        const struct settings_def *d = &settings_defs[i];
        struct settings_value v;
        char msg[256] = "", canon[4097];
        CHECK(settings_parse(d, d->def, &v, msg, sizeof msg) == 0, "%s: default %s: %s", d->name,
              d->def, msg);
        settings_format(d, &v, canon, sizeof canon);
        CHECK_BUF(canon, d->def, d->name);   /* defaults are written canonically */
        CHECK(d->meaning && *d->meaning, "%s has no meaning line", d->name);
        CHECK(settings_find(d->name) == d, "%s: find", d->name);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(settings_defs[j].name, d->name) != 0, "%s twice", d->name);
        if (d->type == SETTINGS_INT || d->type == SETTINGS_NUMBER)
            CHECK(d->min <= d->max, "%s: range", d->name);
        if (d->type == SETTINGS_ENUM)
            CHECK(d->values && d->values[0], "%s: no values", d->name);
        /* the canonical text parses back to itself */
        struct settings_value again;
        char canon2[4097];
        CHECK(settings_parse(d, canon, &again, NULL, 0) == 0, "%s: canonical %s", d->name, canon);
        settings_format(d, &again, canon2, sizeof canon2);
        CHECK_BUF(canon2, canon, d->name);
    }
    CHECK(settings_find("no_such_setting") == NULL, "unknown found");
    CHECK(settings_find(NULL) == NULL, "NULL found");
    CHECK(settings_find("auto_routing_weight_") == NULL, "prefix found");
}

static void test_defaults(void)
{
    CHECK_INT(sizeof default_cases / sizeof default_cases[0], settings_count, "rows tested");
    for (size_t i = 0; i < sizeof default_cases / sizeof default_cases[0]; i++) {
        const struct settings_def *d = settings_find(default_cases[i].name);
        CHECK(d != NULL, "%s missing", default_cases[i].name);
        if (!d)
            continue;
        struct settings_value v;
        char canon[4097];
        settings_default(d, &v);
        settings_format(d, &v, canon, sizeof canon);
        CHECK_BUF(canon, default_cases[i].def, d->name);
    }
    const struct settings_def *t = settings_find("gpu_temperature_threshold");
    struct settings_value v;
    settings_default(t, &v);
    CHECK(v.num == 85.0, "threshold default %g", v.num);
    settings_default(settings_find("auto_routing_weight_quality"), &v);
    CHECK_INT(v.i, 50, "quality weight");
    settings_default(settings_find("auto_routing_strategy"), &v);
    CHECK_STR(v.text, "balanced", "strategy");
    CHECK_INT(v.i, 0, "strategy index");
}

static void test_parse(void)
{
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const struct settings_def *d = settings_find(parse_cases[i].name);
        CHECK(d != NULL, "%s missing", parse_cases[i].name);
        if (!d)
            continue;
        struct settings_value v;
        char msg[256] = "", canon[64] = "";
        int rc = settings_parse(d, parse_cases[i].text, &v, msg, sizeof msg);
        int want_ok = *parse_cases[i].canon != '\0';
        CHECK(rc == (want_ok ? 0 : -1), "%s \"%s\": rc %d (%s)", d->name, parse_cases[i].text, rc,
              msg);
        if (rc == 0) {
            settings_format(d, &v, canon, sizeof canon);
            CHECK_BUF(canon, parse_cases[i].canon, parse_cases[i].text);
        } else {
            CHECK(strncmp(msg, d->name, strlen(d->name)) == 0 && strstr(msg, " must be "),
                  "%s \"%s\": message %s", d->name, parse_cases[i].text, msg);
        }
    }
    /* NUMBER values are rounded to their decimals; INT values carry num too. */
    struct settings_value v;
    CHECK(settings_parse(settings_find("gpu_temperature_threshold"), "70.1", &v, NULL, 0) == 0 &&
          (int)(v.num * 10 + 0.5) == 701, "70.1: %g", v.num);
    CHECK(settings_parse(settings_find("usage_retention_days"), "30", &v, NULL, 0) == 0 &&
          v.i == 30 && v.num == 30.0, "30: %lld %g", (long long)v.i, v.num);
    CHECK(settings_parse(settings_find("response_model"), "upstream", &v, NULL, 0) == 0 &&
          v.i == 1, "upstream index %lld", (long long)v.i);
    CHECK(settings_parse(settings_find("response_model"), NULL, &v, NULL, 0) == -1, "NULL text");
}

static void test_text(void)
{
    const struct settings_def *d = settings_find("internal_fields");
    CHECK(d && d->type == SETTINGS_TEXT, "internal_fields is text");
    for (size_t i = 0; i < sizeof text_cases / sizeof text_cases[0]; i++) {
        struct settings_value v;
        int rc = settings_parse(d, text_cases[i].text, &v, NULL, 0);
        CHECK(rc == (text_cases[i].ok ? 0 : -1), "text case %zu: rc %d", i, rc);
        if (rc == 0)
            CHECK(v.text == text_cases[i].text, "text case %zu: points into the input", i);
    }
    static char longest[4098];
    memset(longest, 'a', 4096);
    struct settings_value v;
    CHECK(settings_parse(d, longest, &v, NULL, 0) == 0, "4096 bytes");
    longest[4096] = 'a';
    CHECK(settings_parse(d, longest, &v, NULL, 0) == -1, "4097 bytes");
}

static void test_messages(void)
{
    for (size_t i = 0; i < sizeof msg_cases / sizeof msg_cases[0]; i++) {
        struct settings_value v;
        char msg[256] = "";
        CHECK(settings_parse(settings_find(msg_cases[i].name), msg_cases[i].text, &v, msg,
                             sizeof msg) == -1, "%s refused", msg_cases[i].name);
        CHECK_BUF(msg, msg_cases[i].msg, msg_cases[i].name);   /* never the refused text */
    }
    char names[1024];
    settings_names(names, sizeof names);
    CHECK_BUF(names, "auto_routing_enabled, auto_routing_strategy, auto_routing_weight_quality,"
              " auto_routing_weight_price, auto_routing_weight_latency, builtin_injection_rules, cors_allowed_origins,"
              " gpu_temperature_threshold, internal_fields, recovery_hint_failures, response_model,"
              " semantic_cache_audit_percent, semantic_cache_embedding_model, semantic_cache_threshold,"
              " semantic_default_model, semantic_embedding_model, semantic_threshold, semantic_weight_bm25,"
              " semantic_weight_embedding, state_fail_policy, state_lease_seconds, state_timeout_ms, usage_currency,"
          " usage_retention_days", "names");
    char small[8];
    settings_names(small, sizeof small);
    CHECK(strlen(small) == 7, "names truncated: %s", small);
}

/* A stored text that no longer parses reads as the default. */
static void test_read(void)
{
    const struct settings_def *d = settings_find("gpu_temperature_threshold");
    struct settings_value v;
    CHECK_INT(settings_read(d, "70", &v), 0, "good text");
    CHECK(v.num == 70.0, "70: %g", v.num);
    CHECK_INT(settings_read(d, NULL, &v), 1, "no row");
    CHECK(v.num == 85.0, "no row: %g", v.num);
    CHECK_INT(settings_read(d, "hot", &v), -1, "bad text");
    CHECK(v.num == 85.0, "bad text: %g", v.num);
    CHECK_INT(settings_read_warn(d, "hot", &v), -1, "bad text, warned");
    CHECK_INT(settings_read_warn(d, "hot", &v), -1, "bad text, warned once");
    CHECK(v.num == 85.0, "bad text warned: %g", v.num);
    d = settings_find("auto_routing_enabled");
    CHECK_INT(settings_read(d, "maybe", &v), -1, "bad bool");
    CHECK_INT(v.i, 0, "bad bool reads false");
}

int main(void)
{
    test_every_row();
    test_defaults();
    test_parse();
    test_text();
    test_messages();
    test_read();
    return check_done();
}
