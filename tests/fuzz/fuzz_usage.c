/* fuzz_usage.c: usage extraction and chunk classification (fcgi/usage.c) on
 * upstream bodies and stream event data.
 *
 * Invariants: token counts are never negative and `found` matches the return
 * value; classifying with and without a usage sink gives the same kind (except
 * that only a sink can make a usage-only chunk); removing `,"usage":null` never
 * lengthens the data, and strict JSON stays strict JSON. */
#include "fuzz.h"

#include "usage.h"

static void check_usage(const struct usage *u)
{
    FUZZ_CHECK(u->prompt_tokens >= 0 && u->completion_tokens >= 0, "negative tokens %lld/%lld",
               (long long)u->prompt_tokens, (long long)u->completion_tokens);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    const char *s = (const char *)data;
    struct usage u;

    int found = usage_from_body(s, size, &u);
    FUZZ_CHECK(found == 0 || found == 1, "usage_from_body returned %d", found);
    FUZZ_CHECK(u.found == found, "found %d, returned %d", u.found, found);
    check_usage(&u);
    if (!found)
        FUZZ_CHECK(u.prompt_tokens == 0 && u.completion_tokens == 0, "counts without usage");

    memset(&u, 0, sizeof u);
    enum chunk_kind k = usage_classify_chunk(s, size, &u), k0 = usage_classify_chunk(s, size, NULL);
    FUZZ_CHECK(k >= CHUNK_OTHER && k <= CHUNK_ERROR, "kind %d", (int)k);
    FUZZ_CHECK(k == k0 || (k == CHUNK_USAGE_ONLY && k0 == CHUNK_OTHER), "kind %d with a sink, %d without", (int)k,
               (int)k0);
    if (k == CHUNK_USAGE_ONLY)
        FUZZ_CHECK(u.found, "a usage-only chunk without usage");
    check_usage(&u);
    int has = usage_has_object(s, size);
    FUZZ_CHECK(has == 0 || has == 1, "usage_has_object returned %d", has);

    char *copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    size_t n = usage_strip_null(copy, size);
    FUZZ_CHECK(n <= size, "stripping grew %zu to %zu bytes", size, n);
    if (n == size)
        FUZZ_CHECK(memcmp(copy, data, size) == 0, "same length, other bytes");
    if (fuzz_is_json_object(s, size))
        FUZZ_CHECK(fuzz_is_json_object(copy, n), "stripping broke a JSON object: %.*s", (int)n, copy);
    free(copy);
    return 0;
}
