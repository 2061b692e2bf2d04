/* test_secret.c: sealing and opening upstream credentials, key files and their paths (lib/secret.h, R-SEC-9). */
#include "check.h"

#include "log.h"
#include "secret.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct secret_key key_a, key_b;

static void key_fill(struct secret_key *k, unsigned char seed)
{
    for (int i = 0; i < SECRET_KEY_BYTES; i++)
        k->bytes[i] = (unsigned char)(seed + 7 * i);
}

/* ---- round trips ---- */

static char long_value[4097];

static const struct {
    const char *plain, *aad;
} trips[] = {
    {"sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "endpoint:1"},
    {"x", "endpoint:2"},
    {"", "endpoint:3"},                         /* an empty value seals and opens too */
    {"Bearer-ish value with spaces = and / + symbols", "endpoint:9223372036854775807"},
    {"caf\xc3\xa9 \xe2\x82\xac", "endpoint:4"},   /* UTF-8 */
    {"no additional data", NULL},
    {"ab", ""},                                 /* "" is no additional data, like NULL */
    {long_value, "endpoint:5"},
};

static void test_round_trips(void)
{
    memset(long_value, 'k', sizeof long_value - 1);
    for (size_t i = 0; i < sizeof trips / sizeof trips[0]; i++) {
        char *s1 = secret_seal(&key_a, trips[i].plain, trips[i].aad);
        char *s2 = secret_seal(&key_a, trips[i].plain, trips[i].aad);
        CHECK(s1 && s2, "case %zu: sealed", i);
        if (!s1 || !s2)
            continue;
        CHECK(secret_is_sealed(s1), "case %zu: %s has the prefix", i, s1);
        CHECK(strcmp(s1, s2) != 0, "case %zu: two seals of one value differ (fresh nonce)", i);
        /* prefix + base64 of nonce (12) + value + tag (16) */
        size_t want = strlen(SECRET_PREFIX) + 4 * ((12 + strlen(trips[i].plain) + 16 + 2) / 3);
        CHECK_INT(strlen(s1), want, "stored length");
        CHECK(!*trips[i].plain || strlen(trips[i].plain) < 4 || !strstr(s1, trips[i].plain),
              "case %zu: the clear value is not in the stored form", i);
        char *p = NULL;
        CHECK_INT(secret_open(&key_a, s1, trips[i].aad, &p), SECRET_OK, "open");
        CHECK(p && strcmp(p, trips[i].plain) == 0, "case %zu: opened to %s", i, p ? p : "(null)");
        secret_free(p);
        free(s1);
        free(s2);
    }
    char *too_long = malloc(SECRET_PLAIN_MAX + 2);
    memset(too_long, 'x', SECRET_PLAIN_MAX + 1);
    too_long[SECRET_PLAIN_MAX + 1] = '\0';
    CHECK(secret_seal(&key_a, too_long, NULL) == NULL, "a value over SECRET_PLAIN_MAX is refused");
    free(too_long);
}

/* ---- what must not open ---- */

static void test_wrong_key_and_row(void)
{
    char *s = secret_seal(&key_a, "sk-secret", "endpoint:7");
    char *p = (char *)"unchanged";
    CHECK_INT(secret_open(&key_b, s, "endpoint:7", &p), SECRET_BAD, "another key");
    CHECK(p == NULL, "no value on failure");
    CHECK_INT(secret_open(&key_a, s, "endpoint:8", &p), SECRET_BAD, "copied onto another row");
    CHECK_INT(secret_open(&key_a, s, NULL, &p), SECRET_BAD, "no additional data");
    CHECK_INT(secret_open(NULL, s, "endpoint:7", &p), SECRET_NO_KEY, "no key");
    CHECK(p == NULL, "no value without a key");
    free(s);
}

/* Every single-bit change anywhere in nonce, ciphertext or tag is refused. */
static void test_tampered(void)
{
    char *s = secret_seal(&key_a, "sk-tamper-me", "endpoint:1");
    const char *b64 = s + strlen(SECRET_PREFIX);
    unsigned char raw[256], flipped[256];
    int n = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)strlen(b64));
    n -= (int)(strlen(b64) - strcspn(b64, "="));        /* EVP_DecodeBlock counts the padding */
    CHECK_INT(n, 12 + 12 + 16, "raw length");
    for (int i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            memcpy(flipped, raw, (size_t)n);
            flipped[i] ^= (unsigned char)(1 << bit);
            char out[512];
            memcpy(out, SECRET_PREFIX, strlen(SECRET_PREFIX));
            EVP_EncodeBlock((unsigned char *)out + strlen(SECRET_PREFIX), flipped, n);
            char *p = NULL;
            CHECK_INT(secret_open(&key_a, out, "endpoint:1", &p), SECRET_BAD, "flipped byte");
            CHECK(p == NULL, "byte %d bit %d: nothing opened", i, bit);
        }
    }
    free(s);
}

static const char *const malformed[] = {
    "enc1:",                     /* nothing */
    "enc1:AAAA",                 /* too short for nonce and tag */
    "enc1:AAA",                  /* not a multiple of 4 */
    "enc1:!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
    "enc1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=A",   /* padding inside */
    "enc1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
    "enc1: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "enc1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",    /* well-formed, not a seal */
};

static void test_malformed(void)
{
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        char *p = NULL;
        CHECK_INT(secret_open(&key_a, malformed[i], "endpoint:1", &p), SECRET_BAD, malformed[i]);
        CHECK(p == NULL, "case %zu: nothing opened", i);
    }
    /* The stored value with its last group cut off. */
    char *s = secret_seal(&key_a, "sk-cut", "endpoint:1");
    s[strlen(s) - 4] = '\0';
    char *p = NULL;
    CHECK_INT(secret_open(&key_a, s, "endpoint:1", &p), SECRET_BAD, "truncated");
    free(s);
}

/* ---- legacy clear values ---- */

static const char *const legacy[] = {"sk-plain-credential", "", "enc", "ENC1:looks-sealed", "enc2:x"};

static void test_legacy(void)
{
    for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++) {
        CHECK(!secret_is_sealed(legacy[i]), "%s is clear", legacy[i]);
        for (int k = 0; k < 2; k++) {
            char *p = NULL;
            CHECK_INT(secret_open(k ? &key_a : NULL, legacy[i], "endpoint:1", &p), SECRET_OK, legacy[i]);
            CHECK_STR(p, legacy[i], "legacy value as it is");
            secret_free(p);
        }
    }
    char aad[SECRET_AAD_MAX];
    secret_aad_endpoint(42, aad);
    const char *a = aad;
    CHECK_STR(a, "endpoint:42", "additional data");
}

/* ---- key files ---- */

static const struct {
    const char *data;
    size_t len;
    int rc;
} key_texts[] = {
    {"0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef", 64, 0},
    {"0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef\n", 65, 0},
    {"0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef\r\n", 66, 0},
    {"0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcde", 63, -1},
    {"0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdefx", 65, -1},
    {"0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdeg", 64, -1},
    {"0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef\n\0", 66, -1},
    {"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
     "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f", 32, 0},   /* raw */
    {"0123456789abcdef0123456789abcdef0", 33, -1},
    {"", 0, -1},
};

static void test_key_parse(void)
{
    for (size_t i = 0; i < sizeof key_texts / sizeof key_texts[0]; i++) {
        struct secret_key k;
        CHECK_INT(secret_key_parse((const unsigned char *)key_texts[i].data, key_texts[i].len, &k),
                  key_texts[i].rc, "key text");
    }
    struct secret_key k;
    secret_key_parse((const unsigned char *)key_texts[0].data, 64, &k);
    CHECK(k.bytes[0] == 0x01 && k.bytes[7] == 0xef && k.bytes[15] == 0xef && k.bytes[31] == 0xef,
          "hex decoded");
    secret_key_parse((const unsigned char *)key_texts[7].data, 32, &k);
    CHECK(k.bytes[0] == 0 && k.bytes[31] == 0x1f, "raw taken as it is");
}

static const struct {
    const char *key_file, *database, *want;
    int rc;
} paths[] = {
    {"", "/var/lib/sluice/sluice.db", "/var/lib/sluice/sluice.key", 0},
    {NULL, "/var/lib/sluice/sluice.db", "/var/lib/sluice/sluice.key", 0},
    {"/etc/sluice/upstream.key", "/var/lib/sluice/sluice.db", "/etc/sluice/upstream.key", 0},
    {"", "sluice.db", "sluice.key", 0},
    {"", "/sluice.db", "/sluice.key", 0},
    {"", "run/x.db", "run/sluice.key", 0},
    {"", "", NULL, -1},
    {"", NULL, NULL, -1},
};

static void test_key_path(void)
{
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char out[256];
        int rc = secret_key_path(paths[i].key_file, paths[i].database, out, sizeof out);
        CHECK_INT(rc, paths[i].rc, "key path rc");
        const char *o = out;
        if (rc == 0)
            CHECK_STR(o, paths[i].want, "key path");
    }
    char small[8];
    CHECK_INT(secret_key_path("", "/a/long/path/sluice.db", small, sizeof small), -1, "does not fit");
}

static void test_key_files(void)
{
    char dir[] = "/tmp/test_secret.XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char path[256], db[256];
    snprintf(path, sizeof path, "%s/sluice.key", dir);
    snprintf(db, sizeof db, "%s/sluice.db", dir);
    struct secret_key k1, k2, k3;
    mode_t old = umask(0);              /* the mode is 0600 whatever the umask */
    CHECK_INT(secret_key_read(path, &k1), -1, "no key file yet");
    CHECK_INT(secret_key_create(path, &k1), 1, "created");
    umask(old);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o", (unsigned)(st.st_mode & 0777));
    CHECK_INT(st.st_size, 65, "64 hex characters and a newline");
    CHECK_INT(secret_key_create(path, &k2), 0, "an existing key file is read, not replaced");
    CHECK(memcmp(k1.bytes, k2.bytes, SECRET_KEY_BYTES) == 0, "the same key");
    CHECK_INT(secret_key_read(path, &k3), 0, "read");
    CHECK(memcmp(k1.bytes, k3.bytes, SECRET_KEY_BYTES) == 0, "the same key read back");

    /* The process key: beside the database by default, loaded once. */
    secret_use_key_file("");
    char got[256];
    const struct secret_key *pk = secret_process_key(db, 0, got, sizeof got);
    CHECK(pk && memcmp(pk->bytes, k1.bytes, SECRET_KEY_BYTES) == 0, "process key beside the database");
    const char *g = got;
    CHECK_STR(g, path, "process key path");
    char *sealed = secret_seal(&k1, "sk-endpoint-3", "endpoint:3");
    char *p = secret_open_endpoint(db, 3, "ep", sealed);
    CHECK_STR(p, "sk-endpoint-3", "secret_open_endpoint");
    secret_free(p);
    CHECK(secret_open_endpoint(db, 4, "ep4", sealed) == NULL, "another endpoint's value: none (logged)");
    CHECK(secret_open_endpoint(db, 3, "ep", NULL) == NULL, "no credential");
    CHECK(secret_open_endpoint(db, 3, "ep", "") == NULL, "an empty credential is none");
    p = secret_open_endpoint(db, 3, "ep", "sk-legacy");
    CHECK_STR(p, "sk-legacy", "legacy value through secret_open_endpoint");
    secret_free(p);
    free(sealed);

    /* A file that holds no key is refused. */
    char bad[256];
    snprintf(bad, sizeof bad, "%s/bad.key", dir);
    FILE *f = fopen(bad, "w");
    fputs("not a key\n", f);
    fclose(f);
    CHECK_INT(secret_key_read(bad, &k3), -1, "not a key");
    CHECK_INT(secret_key_create(bad, &k3), -1, "not replaced either");
    unlink(bad);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    log_open(NULL, "test_secret");
    log_set_level(LOG_ERROR);
    key_fill(&key_a, 1);
    key_fill(&key_b, 2);
    test_round_trips();
    test_wrong_key_and_row();
    test_tampered();
    test_malformed();
    test_legacy();
    test_key_parse();
    test_key_path();
    test_key_files();
    return check_done();
}
