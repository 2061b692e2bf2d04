/* settings.c: the run-time settings table, one row per setting, and its parser (SPEC §0). */
#include "settings.h"

#include "log.h"
#include "util.h"

#include <math.h>   /* isfinite only, a macro: no -lm */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const auto_strategies[] = {"balanced", "cost", "latency", "semantic", NULL};
static const char *const response_models[] = {"client", "upstream", NULL};
static const char *const fail_policies[] = {"fail_open", "fail_closed", NULL};

#define SETTING_BOOL(name, def, meaning) {name, SETTINGS_BOOL, NULL, 0, 1, 0, def, meaning}
#define SETTING_ENUM(name, values, def, meaning) {name, SETTINGS_ENUM, values, 0, 0, 0, def, meaning}
#define SETTING_INT(name, min, max, def, meaning) {name, SETTINGS_INT, NULL, min, max, 0, def, meaning}
#define SETTING_NUMBER(name, min, max, decimals, def, meaning) \
    {name, SETTINGS_NUMBER, NULL, min, max, decimals, def, meaning}
#define SETTING_TEXT(name, max, def, meaning) {name, SETTINGS_TEXT, NULL, 0, max, 0, def, meaning}

/* The settings, in the order config get lists them. A row's fields:
 *   name      the key in table `settings` and the member of /api/v1/system/inference-config
 *   type      how the stored text is read (enum settings_type)
 *   values    ENUM: the allowed words
 *   min, max  INT, NUMBER: the inclusive range; TEXT: max is the longest value in bytes
 *   decimals  NUMBER: most digits after the point
 *   def       the value while no row is stored, or while the stored text does not parse
 *   meaning   one line; the README's settings table repeats it
 * A new setting is one row here plus the code that reads it (lib/snapshot.c for the
 * data plane); sluicectl, the API and the README check follow from the table. */
const struct settings_def settings_defs[] = {
    SETTING_BOOL("auto_routing_enabled", "false",
                 "R-AUTO-1: model `auto` for callers whose key has no policy of its own"),
    SETTING_ENUM("auto_routing_strategy", auto_strategies, "balanced",
                 "R-AUTO-4: how `auto` orders its candidates (a key's policy wins)"),
    SETTING_INT("auto_routing_weight_quality", 0, 100, "50",
                "R-AUTO-4: weight of the policy's quality score in `balanced`"),
    SETTING_INT("auto_routing_weight_price", 0, 100, "30",
                "R-AUTO-4: weight of price in `balanced`"),
    SETTING_INT("auto_routing_weight_latency", 0, 100, "20",
                "R-AUTO-4: weight of observed latency in `balanced`"),
    SETTING_BOOL("builtin_injection_rules", "false",
                 "R-GUARD-3: the built-in prompt-injection rules (action flag) apply to every request"),
    SETTING_TEXT("cors_allowed_origins", 4096, "",
                 "R-API-7: origins (comma-separated, `*` for any) whose pages may call the data plane; empty: CORS off"),
    SETTING_NUMBER("gpu_temperature_threshold", 0, 150, 1, "85",
                   "R-LB-6: replicas on a node hotter than this many °C are not candidates"),
    SETTING_TEXT("internal_fields", 4096, "",
                 "R-API-5: body fields (comma- or space-separated) stripped before forwarding"),
    SETTING_INT("recovery_hint_failures", 1, 1000, "5",
                "R-ADM-3: consecutive failed requests to an endpoint after which the page shows a recovery hint"),
    SETTING_ENUM("response_model", response_models, "client",
                 "R-RT-5: the model responses name: the client's (`client`) or the target's"),
    SETTING_INT("semantic_cache_audit_percent", 0, 100, "10",
                "R-CACHE-4: the share of semantic hits recorded in the hit audit (request, similarity, matched entry)"),
    SETTING_TEXT("semantic_cache_embedding_model", 256, "",
                 "R-CACHE-4: the routed embedding model the semantic cache embeds with; empty: no semantic cache"),
    SETTING_NUMBER("semantic_cache_threshold", 0, 1, 3, "0.95",
                   "R-CACHE-4: the least cosine similarity a semantic hit needs (a model policy may set its own)"),
    SETTING_TEXT("semantic_default_model", 256, "",
                 "R-SEM-3: the model the semantic strategy puts first when no score reaches `semantic_threshold`; empty: the best-scored one"),
    SETTING_TEXT("semantic_embedding_model", 256, "",
                 "R-SEM-2: the routed embedding model the semantic strategy compares texts with; empty: BM25 only"),
    SETTING_NUMBER("semantic_threshold", 0, 1, 3, "0.1",
                 "R-SEM-2: the least score (0..1, BM25 or hybrid) the semantic strategy routes by; below it the fallback"),
    SETTING_NUMBER("semantic_weight_bm25", 0, 1, 3, "0.4",
                 "R-SEM-2: weight of the BM25 score in the semantic strategy's hybrid score"),
    SETTING_NUMBER("semantic_weight_embedding", 0, 1, 3, "0.6",
                 "R-SEM-2: weight of the embeddings' cosine similarity in the hybrid score"),
    SETTING_ENUM("state_fail_policy", fail_policies, "fail_open",
                 "R-KEY-2 (issue 19): with a Redis `state`, a request of a key with limits while Redis does not answer is admitted without them (`fail_open`) or refused with 503 `state_unavailable` (`fail_closed`)"),
    SETTING_INT("state_lease_seconds", 1, 3600, "10",
                "R-KEY-3 (issue 19): with a Redis `state`, a concurrency slot of a host that stops renewing it (died) frees after this long"),
    SETTING_INT("state_timeout_ms", 10, 10000, "200",
                "R-KEY-2 (issue 19): the longest one call to a Redis `state` may take before the fail policy applies"),
    SETTING_TEXT("usage_currency", 16, "USD",
                 "R-ADM-3: the currency name usage reports give next to their cost (prices are per model policy)"),
    SETTING_INT("usage_retention_days", 1, 36500, "90",
                "R-USE-7: `sluicectl usage prune` without --days deletes events older than this"),
};
const size_t settings_count = sizeof settings_defs / sizeof settings_defs[0];

const struct settings_def *settings_find(const char *name)
{
    for (size_t i = 0; name && i < settings_count; i++)
        if (strcmp(settings_defs[i].name, name) == 0)
            return &settings_defs[i];
    return NULL;
}

/* Appends "a, b, c" of a NULL-terminated list. */
static void join(char *out, size_t n, const char *const *words, size_t count)
{
    size_t used = strlen(out);
    for (size_t i = 0; (count ? i < count : words[i] != NULL) && used < n; i++) {
        int w = snprintf(out + used, n - used, "%s%s", i ? ", " : "", words[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

void settings_describe(const struct settings_def *d, char *out, size_t n)
{
    if (n == 0)
        return;
    out[0] = '\0';
    switch (d->type) {
    case SETTINGS_BOOL:
        snprintf(out, n, "true or false");
        return;
    case SETTINGS_ENUM:
        snprintf(out, n, "one of: ");
        join(out, n, d->values, 0);
        return;
    case SETTINGS_INT:
        snprintf(out, n, "a whole number from %lld to %lld", (long long)d->min, (long long)d->max);
        return;
    case SETTINGS_NUMBER:
        snprintf(out, n, "a number from %lld to %lld with at most %d decimal%s", (long long)d->min,
                 (long long)d->max, d->decimals, d->decimals == 1 ? "" : "s");
        return;
    case SETTINGS_TEXT:
        snprintf(out, n, "text of at most %lld bytes without control characters",
                 (long long)d->max);
        return;
    }
}

void settings_names(char *out, size_t n)
{
    if (n == 0)
        return;
    out[0] = '\0';
    const char *names[sizeof settings_defs / sizeof settings_defs[0]];
    for (size_t i = 0; i < settings_count; i++)
        names[i] = settings_defs[i].name;
    join(out, n, names, settings_count);
}

/* The nearest whole number, without libm (lib users need not link -lm); |x| < 2^62. */
static double round_whole(double x)
{
    return x >= 0 ? (double)(int64_t)(x + 0.5) : -(double)(int64_t)(-x + 0.5);
}

/* -?[0-9]+(.[0-9]+)?: no blanks, signs, exponents, hex, inf or nan (which strtod takes). */
static int plain_decimal(const char *s)
{
    if (*s == '-')
        s++;
    size_t digits = strspn(s, "0123456789");
    if (digits == 0)
        return 0;
    s += digits;
    if (*s == '.') {
        s++;
        digits = strspn(s, "0123456789");
        if (digits == 0)
            return 0;
        s += digits;
    }
    return *s == '\0';
}

static int parse_number(const struct settings_def *d, const char *text, double *out)
{
    if (!plain_decimal(text))
        return -1;
    double v = strtod(text, NULL);
    if (!isfinite(v) || v < (double)d->min || v > (double)d->max)
        return -1;
    double scale = 1;
    for (int i = 0; i < d->decimals; i++)
        scale *= 10;
    /* 70.1 arrives as 70.099999999999994 from a JSON double: near enough to 701 tenths. */
    double scaled = v * scale, whole = round_whole(scaled);
    double off = scaled > whole ? scaled - whole : whole - scaled;
    double mag = scaled < 0 ? -scaled : scaled;
    if (off > 1e-6 * (mag > 1 ? mag : 1))
        return -1;
    *out = whole / scale;
    return 0;
}

static int parse_bool(const char *s, int64_t *out)
{
    static const char *const yes[] = {"true", "on", "1"}, *const no[] = {"false", "off", "0"};
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* At most max bytes, no ASCII control character (the admin checks UTF-8 on input). */
static int parse_text(const struct settings_def *d, const char *s)
{
    size_t n = strlen(s);
    if (n > (size_t)d->max)
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return -1;
    return 0;
}

int settings_parse(const struct settings_def *d, const char *text, struct settings_value *v,
                   char *msg, size_t msglen)
{
    struct settings_value r = {0, 0, NULL};
    int rc = -1;
    if (!text)
        goto out;
    switch (d->type) {
    case SETTINGS_BOOL:
        rc = parse_bool(text, &r.i);
        break;
    case SETTINGS_ENUM:
        for (int64_t i = 0; d->values[i]; i++)
            if (strcmp(text, d->values[i]) == 0) {
                r.i = i, r.text = d->values[i], rc = 0;
                break;
            }
        break;
    case SETTINGS_INT:
        rc = parse_i64(text, d->min, d->max, &r.i);
        r.num = (double)r.i;
        break;
    case SETTINGS_NUMBER:
        rc = parse_number(d, text, &r.num);
        break;
    case SETTINGS_TEXT:
        rc = parse_text(d, text);
        r.text = text;
        break;
    }
out:
    if (rc == 0) {
        *v = r;
    } else if (msg && msglen) {
        char allowed[256];
        settings_describe(d, allowed, sizeof allowed);
        snprintf(msg, msglen, "%s must be %s", d->name, allowed);
    }
    return rc;
}

void settings_default(const struct settings_def *d, struct settings_value *v)
{
    if (settings_parse(d, d->def, v, NULL, 0) != 0)
        *v = (struct settings_value){0, 0, NULL};   /* a broken row; test_settings fails on it */
}

int settings_read(const struct settings_def *d, const char *stored, struct settings_value *v)
{
    if (stored && settings_parse(d, stored, v, NULL, 0) == 0)
        return 0;
    settings_default(d, v);
    return stored ? -1 : 1;
}

/* Per row, a hash of the bad text last warned about (0: none). */
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t warned[sizeof settings_defs / sizeof settings_defs[0]];

static uint64_t text_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a; never 0 for these inputs in practice */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}

int settings_read_warn(const struct settings_def *d, const char *stored, struct settings_value *v)
{
    int rc = settings_read(d, stored, v);
    size_t i = (size_t)(d - settings_defs);
    if (i >= settings_count)
        return rc;
    uint64_t h = rc < 0 ? text_hash(stored) : 0;
    pthread_mutex_lock(&warned_lock);
    int first = h && warned[i] != h;
    warned[i] = h;
    pthread_mutex_unlock(&warned_lock);
    if (first) {
        char allowed[256];
        settings_describe(d, allowed, sizeof allowed);
        log_warn("setting %s: the stored value does not parse (it must be %s); using the default %s",
                 d->name, allowed, *d->def ? d->def : "(empty)");
    }
    return rc;
}

void settings_format(const struct settings_def *d, const struct settings_value *v, char *out,
                     size_t n)
{
    if (n == 0)
        return;
    switch (d->type) {
    case SETTINGS_BOOL:
        snprintf(out, n, "%s", v->i ? "true" : "false");
        return;
    case SETTINGS_INT:
        snprintf(out, n, "%lld", (long long)v->i);
        return;
    case SETTINGS_NUMBER:
        if (v->num == round_whole(v->num))
            snprintf(out, n, "%lld", (long long)v->num);
        else {
            /* one form for one value: 0.950 and 0.95 are both stored as 0.95 */
            char full[64];
            snprintf(full, sizeof full, "%.*f", d->decimals, v->num);
            size_t len = strlen(full);
            while (len > 1 && full[len - 1] == '0' && strchr(full, '.'))
                full[--len] = '\0';
            if (len > 0 && full[len - 1] == '.')
                full[--len] = '\0';
            snprintf(out, n, "%s", full);     /* a short buffer gets a prefix of the whole */
        }
        return;
    case SETTINGS_ENUM:
    case SETTINGS_TEXT:
        snprintf(out, n, "%s", v->text ? v->text : "");
        return;
    }
}
