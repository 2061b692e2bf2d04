/* test_util.c: hashing, number parsing, tokens, day strings (lib/util.h), capped buffers and JSON strings (lib/buf.h), arenas (lib/arena.h). */
#include "check.h"

#include "arena.h"
#include "buf.h"
#include "util.h"

#include <json-c/json.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const struct {
    const char *in;
    size_t len;
    const char *hex;
} sha_cases[] = {
    {"", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    /* embedded NUL: the length is used, not strlen */
    {"a\0b", 3, NULL},
};

static const struct {
    const char *s;
    int64_t min, max;
    int rc;
    int64_t want;
} i64_cases[] = {
    {"0", 0, 10, 0, 0},
    {"10", 0, 10, 0, 10},
    {"11", 0, 10, -1, 0},
    {"-1", 0, 10, -1, 0},
    {"-1", -5, 5, 0, -1},
    {"-6", -5, 5, -1, 0},
    {"65535", 1, 65535, 0, 65535},
    {"65536", 1, 65535, -1, 0},
    {"9223372036854775807", INT64_MIN, INT64_MAX, 0, INT64_MAX},
    {"-9223372036854775808", INT64_MIN, INT64_MAX, 0, INT64_MIN},
    {"9223372036854775808", INT64_MIN, INT64_MAX, -1, 0},   /* overflow */
    {"-9223372036854775809", INT64_MIN, INT64_MAX, -1, 0},
    {"99999999999999999999999", INT64_MIN, INT64_MAX, -1, 0},
    {"007", 0, 10, 0, 7},
    /* junk */
    {"", 0, 10, -1, 0},
    {"12abc", 0, 100, -1, 0},
    {"12 ", 0, 100, -1, 0},
    {"1.5", 0, 100, -1, 0},
    {"1e3", 0, 10000, -1, 0},
    {"0x10", 0, 100, -1, 0},
    {"abc", 0, 100, -1, 0},
    {"-", 0, 100, -1, 0},
    {"+", 0, 100, -1, 0},
    {"1\n", 0, 100, -1, 0},
};

static const struct {
    const char *a, *b;
    size_t n;
    int want;
} ct_cases[] = {
    {"", "", 0, 1},
    {"abc", "abc", 3, 1},
    {"abc", "abd", 3, 0},
    {"xbc", "abc", 3, 0},
    {"abc", "abd", 2, 1},       /* only n bytes compared */
    {"a\0c", "a\0d", 3, 0},     /* past a NUL */
    {"\xff\x00", "\xff\x00", 2, 1},
    {"\x80", "\x00", 1, 0},
};

/* buf_json_str: the output parses back to the very same bytes. */
static const struct {
    const char *in;
    size_t len;
    const char *want;   /* exact JSON text */
} json_cases[] = {
    {"plain", 5, "\"plain\""},
    {"", 0, "\"\""},
    {"say \"hi\"", 8, "\"say \\\"hi\\\"\""},
    {"a\\b", 3, "\"a\\\\b\""},
    {"l1\nl2", 5, "\"l1\\nl2\""},
    {"t\tt", 3, "\"t\\tt\""},
    {"cr\r", 3, "\"cr\\r\""},
    {"\x01\x1f", 2, "\"\\u0001\\u001f\""},
    {"\x08\x0c", 2, "\"\\u0008\\u000c\""},
    {"nul\0x", 5, "\"nul\\u0000x\""},
    {"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 12, "\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
    {"/</script>", 10, "\"/</script>\""},
    {"del\x7f", 4, "\"del\x7f\""},
};

static const struct {
    int64_t epoch_ms;
    const char *tz;
    const char *want;
} day_cases[] = {
    {0, "UTC", "1970-01-01"},
    {1700000000000LL, "UTC", "2023-11-14"},         /* 2023-11-14T22:13:20Z */
    {1709251199999LL, "UTC", "2024-02-29"},         /* last ms of a leap day */
    {1709251200000LL, "UTC", "2024-03-01"},
    {1735689599999LL, "UTC", "2024-12-31"},
    {1735689600000LL, "UTC", "2025-01-01"},
    /* the process time zone decides the billing day (POSIX TZ: UTC-9 is 9 h east) */
    {1700000000000LL, "UTC-9", "2023-11-15"},
    {1700000000000LL, "UTC+23", "2023-11-13"},
};

static int in_alphabet(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static void test_sha256(void)
{
    for (size_t i = 0; i < sizeof sha_cases / sizeof sha_cases[0]; i++) {
        char out[65];
        memset(out, 'X', sizeof out);
        sha256_hex(sha_cases[i].in, sha_cases[i].len, out);
        CHECK_INT(strlen(out), 64, "sha256 length");
        if (sha_cases[i].hex) {
            const char *got = out;
            CHECK_STR(got, sha_cases[i].hex, "sha256");
        } else {
            char shorter[65];
            sha256_hex(sha_cases[i].in, 1, shorter);
            CHECK(strcmp(out, shorter) != 0, "sha256 stopped at the NUL");
        }
    }
}

static void test_parse_i64(void)
{
    for (size_t i = 0; i < sizeof i64_cases / sizeof i64_cases[0]; i++) {
        int64_t v = 4242;
        int rc = parse_i64(i64_cases[i].s, i64_cases[i].min, i64_cases[i].max, &v);
        CHECK(rc == i64_cases[i].rc, "parse_i64(\"%s\", %lld, %lld) rc %d, want %d", i64_cases[i].s,
              (long long)i64_cases[i].min, (long long)i64_cases[i].max, rc, i64_cases[i].rc);
        if (i64_cases[i].rc == 0)
            CHECK(v == i64_cases[i].want, "parse_i64(\"%s\") = %lld", i64_cases[i].s, (long long)v);
        else
            CHECK(v == 4242, "parse_i64(\"%s\") wrote %lld on failure", i64_cases[i].s, (long long)v);
    }
    int64_t v = 0;
    CHECK_INT(parse_i64(NULL, 0, 10, &v), -1, "parse_i64(NULL)");
}

static void test_ct_equal(void)
{
    for (size_t i = 0; i < sizeof ct_cases / sizeof ct_cases[0]; i++)
        CHECK(ct_equal(ct_cases[i].a, ct_cases[i].b, ct_cases[i].n) == ct_cases[i].want,
              "ct_equal case %zu: want %d", i, ct_cases[i].want);
}

static void test_random_token(void)
{
    static const size_t lens[] = {1, 16, 32, 43, 255, 256, 257, 1000};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t n = lens[k];
        char *a = malloc(n + 2), *b = malloc(n + 2);
        memset(a, '#', n + 2);
        memset(b, '#', n + 2);
        random_token(a, n);
        random_token(b, n);
        CHECK(strlen(a) == n && a[n + 1] == '#', "random_token(%zu) length %zu", n, strlen(a));
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            ok &= in_alphabet(a[i]) && in_alphabet(b[i]);
        CHECK(ok, "random_token(%zu) outside [A-Za-z0-9]", n);
        if (n >= 16)
            CHECK(strcmp(a, b) != 0, "two random_token(%zu) calls are equal", n);
        free(a);
        free(b);
    }
    /* every character class shows up over many characters */
    char big[4001];
    random_token(big, 4000);
    int up = 0, lo = 0, dig = 0;
    for (int i = 0; i < 4000; i++) {
        up |= big[i] >= 'A' && big[i] <= 'Z';
        lo |= big[i] >= 'a' && big[i] <= 'z';
        dig |= big[i] >= '0' && big[i] <= '9';
    }
    CHECK(up && lo && dig, "random_token alphabet not fully used: %d %d %d", up, lo, dig);
    random_token(big, 0);
    CHECK_INT(big[0], '\0', "random_token(0) is empty");
}

static void test_json_str(void)
{
    for (size_t i = 0; i < sizeof json_cases / sizeof json_cases[0]; i++) {
        struct buf b;
        buf_init(&b, 0);
        CHECK_INT(buf_json_str(&b, json_cases[i].in, json_cases[i].len), 0, "buf_json_str rc");
        CHECK_STR(b.data, json_cases[i].want, "buf_json_str text");
        /* parse it back with json-c */
        struct json_tokener *tok = json_tokener_new();
        struct json_object *o = json_tokener_parse_ex(tok, b.data, (int)b.len);
        int parsed = json_tokener_get_error(tok) == json_tokener_success;
        json_tokener_free(tok);
        CHECK(parsed && json_object_is_type(o, json_type_string), "case %zu does not parse: %s", i, b.data);
        if (parsed && o) {
            CHECK(json_object_get_string_len(o) == (int)json_cases[i].len &&
                      memcmp(json_object_get_string(o), json_cases[i].in, json_cases[i].len) == 0,
                  "case %zu: round trip differs", i);
        }
        json_object_put(o);
        /* appends: existing contents are kept */
        buf_reset(&b);
        buf_puts(&b, "x=");
        buf_json_str(&b, "q", 1);
        CHECK_STR(b.data, "x=\"q\"", "buf_json_str appends");
        buf_free(&b);
    }
    /* every byte 0x00..0xff: control bytes escaped, the rest verbatim */
    {
        char all[256];
        for (int i = 0; i < 256; i++)
            all[i] = (char)i;
        struct buf b;
        buf_init(&b, 0);
        buf_json_str(&b, all, 128);     /* ASCII only: json-c validates nothing above */
        int raw_ctl = 0;
        for (size_t i = 0; i < b.len; i++)
            raw_ctl |= (unsigned char)b.data[i] < 0x20;
        CHECK(!raw_ctl, "raw control byte in %zu bytes of output", b.len);
        struct json_object *o = json_tokener_parse(b.data);
        CHECK(o && json_object_get_string_len(o) == 128 && memcmp(json_object_get_string(o), all, 128) == 0,
              "all ASCII bytes round trip");
        json_object_put(o);
        buf_free(&b);
    }
}

static void test_buf_max(void)
{
    struct buf b;
    buf_init(&b, 8);
    CHECK_INT(buf_append(&b, "12345", 5), 0, "append under max");
    CHECK_INT(buf_append(&b, "6789", 4), -1, "append over max");
    CHECK_INT(b.len, 5, "len kept after refused append");
    CHECK_STR(b.data, "12345", "contents intact after refused append");
    CHECK_INT(buf_append(&b, "678", 3), 0, "append up to exactly max");
    CHECK_STR(b.data, "12345678", "contents at max");
    CHECK_INT(buf_append(&b, "", 0), 0, "empty append at max");
    CHECK_INT(buf_append(&b, "9", 1), -1, "one byte over max");
    CHECK_INT(buf_puts(&b, "9"), -1, "puts over max");
    CHECK_STR(b.data, "12345678", "contents intact");
    buf_reset(&b);
    CHECK_INT(b.len, 0, "reset len");
    CHECK_STR(b.data, "", "reset keeps a NUL-terminated empty string");
    CHECK_INT(buf_printf(&b, "%d-%s", 42, "abc"), 0, "printf under max");
    CHECK_STR(b.data, "42-abc", "printf");
    CHECK_INT(buf_printf(&b, "%s", "xyz"), -1, "printf over max");
    CHECK_STR(b.data, "42-abc", "contents intact after refused printf");
    buf_free(&b);
    CHECK(b.data == NULL && b.len == 0 && b.max == 8, "buf_free resets but keeps max");

    /* unlimited: grows past the first allocation */
    buf_init(&b, 0);
    int ok = 0;
    for (int i = 0; i < 10000; i++)
        ok |= buf_append(&b, "0123456789", 10);
    CHECK(ok == 0 && b.len == 100000 && b.data[b.len] == '\0', "unlimited growth to %zu", b.len);
    CHECK(memcmp(b.data + 99990, "0123456789", 10) == 0, "grown contents");
    buf_free(&b);

    /* a refused JSON string reports -1 */
    buf_init(&b, 4);
    CHECK_INT(buf_json_str(&b, "abcdef", 6), -1, "json string over max");
    buf_free(&b);
}

/* Run f in a child; its exit status, or 128 + signal. */
static int in_child(void (*f)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        f();
        _exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* arena_alloc of a size that cannot be satisfied must abort (arena.h: "Allocation
 * failure aborts the process"), never hand back a short block. */
static void huge_alloc(void)
{
    struct arena a;
    arena_init(&a);
    unsigned char *p = arena_alloc(&a, SIZE_MAX - 7);
    /* reaching this line is the bug: p is not SIZE_MAX - 7 bytes long */
    _exit(p ? 3 : 4);
}

static void test_arena(void)
{
    static const size_t sizes[] = {1, 3, 15, 16, 17, 100, 0, 4096, 16384, 20000, 7, 16383};
    struct arena a;
    arena_init(&a);
    for (int round = 0; round < 3; round++) {
        void *first = NULL;
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            unsigned char *p = arena_alloc(&a, sizes[i]);
            CHECK(p != NULL, "arena_alloc(%zu) NULL", sizes[i]);
            if (!first)
                first = p;
            CHECK(((uintptr_t)p & 15) == 0, "arena_alloc(%zu) not 16-byte aligned: %p", sizes[i], (void *)p);
            int zero = 1;
            for (size_t k = 0; k < sizes[i]; k++)
                zero &= p[k] == 0;
            CHECK(zero, "round %d: arena_alloc(%zu) not zeroed", round, sizes[i]);
            memset(p, 0xAB, sizes[i]);  /* dirty it for the next round */
        }
        char *s = arena_strdup(&a, "hello");
        CHECK_STR(s, "hello", "arena_strdup");
        char *t = arena_strndup(&a, "hello world", 5);
        CHECK_STR(t, "hello", "arena_strndup");
        char *u = arena_printf(&a, "%s-%d", "n", 7);
        CHECK_STR(u, "n-7", "arena_printf");
        CHECK(a.used_total > 0, "used_total counts");
        arena_clear(&a);
        CHECK_INT(a.used_total, 0, "arena_clear resets used_total");
        /* the first block is kept and reused: the first allocation lands there again */
        void *again = arena_alloc(&a, sizes[0]);
        CHECK(again == first, "round %d: arena_clear did not reuse the first block", round);
        arena_clear(&a);
    }
    /* distinct allocations do not overlap */
    unsigned char *x = arena_alloc(&a, 24), *y = arena_alloc(&a, 24);
    CHECK(y >= x + 24 || x >= y + 24, "allocations overlap");
    arena_free(&a);
    CHECK(a.head == NULL, "arena_free empties the arena");

    int st = in_child(huge_alloc);
    CHECK(st == 128 + SIGABRT, "arena_alloc(SIZE_MAX - 7) must abort; child status %d (3 = returned a short block)",
          st);
}

static void test_day_string(void)
{
    const char *old = getenv("TZ");
    char *saved = old ? strdup(old) : NULL;
    for (size_t i = 0; i < sizeof day_cases / sizeof day_cases[0]; i++) {
        setenv("TZ", day_cases[i].tz, 1);
        tzset();
        char out[11];
        memset(out, 'X', sizeof out);
        day_string(day_cases[i].epoch_ms, out);
        CHECK(memcmp(out, day_cases[i].want, 11) == 0, "day_string(%lld, TZ=%s) = %.11s, want %s",
              (long long)day_cases[i].epoch_ms, day_cases[i].tz, out, day_cases[i].want);
    }
    if (saved) {
        setenv("TZ", saved, 1);
        free(saved);
    } else {
        unsetenv("TZ");
    }
    tzset();
}

int main(void)
{
    test_sha256();
    test_parse_i64();
    test_ct_equal();
    test_random_token();
    test_json_str();
    test_buf_max();
    test_arena();
    test_day_string();
    return check_done();
}
