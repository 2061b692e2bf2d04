/* secret.c: seal and open upstream credentials with AES-256-GCM under a key file (R-SEC-9). */
#include "secret.h"

#include "sdb.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NONCE_LEN 12
#define TAG_LEN 16
#define PREFIX_LEN (sizeof SECRET_PREFIX - 1)
#define KEY_FILE_MAX 256           /* a key file is 32 or 64 bytes and a newline */

/* ---- base64 (standard alphabet, padded; the decoder takes nothing else) ---- */

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(unsigned char c)
{
    const char *p = c ? strchr(b64_alphabet, c) : NULL;
    return p ? (int)(p - b64_alphabet) : -1;
}

/* Decodes all of in (len a multiple of 4, "=" only as the last one or two) into out,
 * which holds len / 4 * 3 bytes. Returns the length, or -1. */
static long b64_decode(const char *in, size_t len, unsigned char *out)
{
    if (len % 4 != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)in[i + j];
            if (c == '=' && i + 4 == len && j >= 2 && (j == 3 || in[i + 3] == '=')) {
                v[j] = 0;
                pad++;
            } else if ((v[j] = b64_value(c)) < 0) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (unsigned char)(w >> 16);
        if (pad < 2)
            out[o++] = (unsigned char)(w >> 8);
        if (pad < 1)
            out[o++] = (unsigned char)w;
    }
    return (long)o;
}

/* ---- values ---- */

void secret_aad_endpoint(int64_t id, char out[SECRET_AAD_MAX])
{
    snprintf(out, SECRET_AAD_MAX, "endpoint:%" PRId64, id);
}

int secret_is_sealed(const char *stored)
{
    return stored && strncmp(stored, SECRET_PREFIX, PREFIX_LEN) == 0;
}

void secret_free(char *plain)
{
    if (plain) {
        OPENSSL_cleanse(plain, strlen(plain));
        free(plain);
    }
}

void secret_key_wipe(struct secret_key *key) { OPENSSL_cleanse(key, sizeof *key); }

char *secret_seal(const struct secret_key *key, const char *plain, const char *aad)
{
    size_t n = strlen(plain);
    if (n > SECRET_PLAIN_MAX)
        return NULL;
    size_t raw_len = NONCE_LEN + n + TAG_LEN;
    unsigned char *raw = malloc(raw_len);
    char *out = malloc(PREFIX_LEN + 4 * ((raw_len + 2) / 3) + 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (!raw || !out || !ctx)
        abort();
    int len = 0, ok =
        RAND_bytes(raw, NONCE_LEN) == 1 &&
        EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1 &&
        EVP_EncryptInit_ex(ctx, NULL, NULL, key->bytes, raw) == 1 &&
        (!aad || !*aad ||
         EVP_EncryptUpdate(ctx, NULL, &len, (const unsigned char *)aad, (int)strlen(aad)) == 1) &&
        (n == 0 || EVP_EncryptUpdate(ctx, raw + NONCE_LEN, &len, (const unsigned char *)plain, (int)n) == 1) &&
        EVP_EncryptFinal_ex(ctx, raw + NONCE_LEN + n, &len) == 1 &&
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, raw + NONCE_LEN + n) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok)
        abort();                    /* no randomness or no AES: nothing sensible to do */
    memcpy(out, SECRET_PREFIX, PREFIX_LEN);
    EVP_EncodeBlock((unsigned char *)out + PREFIX_LEN, raw, (int)raw_len);
    OPENSSL_cleanse(raw, raw_len);
    free(raw);
    return out;
}

enum secret_result secret_open(const struct secret_key *key, const char *stored, const char *aad,
                               char **plain)
{
    *plain = NULL;
    if (!secret_is_sealed(stored)) {
        /* A legacy clear value (R-SEC-9: `sluicectl init` seals it). */
        if (!(*plain = strdup(stored ? stored : "")))
            abort();
        return SECRET_OK;
    }
    if (!key)
        return SECRET_NO_KEY;
    const char *b64 = stored + PREFIX_LEN;
    size_t blen = strlen(b64);
    if (blen > 4 * ((NONCE_LEN + SECRET_PLAIN_MAX + TAG_LEN + 2) / 3))
        return SECRET_BAD;
    unsigned char *raw = malloc(blen / 4 * 3 + 1);
    if (!raw)
        abort();
    long raw_len = b64_decode(b64, blen, raw);
    enum secret_result rc = SECRET_BAD;
    if (raw_len < NONCE_LEN + TAG_LEN)
        goto out;
    size_t n = (size_t)raw_len - NONCE_LEN - TAG_LEN;
    char *p = malloc(n + 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (!p || !ctx)
        abort();
    int len = 0, ok =
        EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1 &&
        EVP_DecryptInit_ex(ctx, NULL, NULL, key->bytes, raw) == 1 &&
        (!aad || !*aad ||
         EVP_DecryptUpdate(ctx, NULL, &len, (const unsigned char *)aad, (int)strlen(aad)) == 1) &&
        (n == 0 || EVP_DecryptUpdate(ctx, (unsigned char *)p, &len, raw + NONCE_LEN, (int)n) == 1) &&
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, raw + NONCE_LEN + n) == 1 &&
        EVP_DecryptFinal_ex(ctx, (unsigned char *)p + n, &len) == 1;   /* checks the tag */
    EVP_CIPHER_CTX_free(ctx);
    p[n] = '\0';
    /* A credential is text: a NUL inside would cut it short without a word. */
    if (ok && memchr(p, '\0', n) == NULL) {
        *plain = p;
        rc = SECRET_OK;
    } else {
        OPENSSL_cleanse(p, n);
        free(p);
    }
out:
    OPENSSL_cleanse(raw, blen / 4 * 3 + 1);
    free(raw);
    return rc;
}

/* ---- key files ---- */

static int hex_value(unsigned char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int secret_key_parse(const unsigned char *data, size_t len, struct secret_key *key)
{
    if (len == SECRET_KEY_BYTES) {
        memcpy(key->bytes, data, SECRET_KEY_BYTES);
        return 0;
    }
    if (len < 2 * SECRET_KEY_BYTES)
        return -1;
    for (size_t i = 2 * SECRET_KEY_BYTES; i < len; i++)
        if (!strchr(" \t\r\n", data[i]) || !data[i])
            return -1;
    for (size_t i = 0; i < SECRET_KEY_BYTES; i++) {
        int hi = hex_value(data[2 * i]), lo = hex_value(data[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            secret_key_wipe(key);
            return -1;
        }
        key->bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

int secret_key_read(const char *path, struct secret_key *key)
{
    unsigned char buf[KEY_FILE_MAX + 1];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    ssize_t got;
    while (len < sizeof buf && (got = read(fd, buf + len, sizeof buf - len)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            OPENSSL_cleanse(buf, sizeof buf);
            errno = e;
            return -1;
        }
        len += (size_t)got;
    }
    close(fd);
    int rc = len <= KEY_FILE_MAX ? secret_key_parse(buf, len, key) : -1;
    OPENSSL_cleanse(buf, sizeof buf);
    if (rc != 0)
        errno = EINVAL;
    return rc;
}

/* Writes the whole key as hex to a new file (mode 0600 whatever the umask). 0 or -1. */
static int key_write_new(const char *path, const struct secret_key *key)
{
    static const char hex[] = "0123456789abcdef";
    char text[2 * SECRET_KEY_BYTES + 1];
    for (size_t i = 0; i < SECRET_KEY_BYTES; i++) {
        text[2 * i] = hex[key->bytes[i] >> 4];
        text[2 * i + 1] = hex[key->bytes[i] & 15];
    }
    text[2 * SECRET_KEY_BYTES] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        OPENSSL_cleanse(text, sizeof text);
        return -1;
    }
    size_t done = 0;
    int rc = fchmod(fd, 0600);
    while (rc == 0 && done < sizeof text) {
        ssize_t w = write(fd, text + done, sizeof text - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = -1;
        else
            done += (size_t)w;
    }
    if (rc == 0)
        rc = fsync(fd);
    int e = errno;
    close(fd);
    OPENSSL_cleanse(text, sizeof text);
    if (rc != 0) {
        unlink(path);
        errno = e;
    }
    return rc;
}

int secret_key_create(const char *path, struct secret_key *key)
{
    if (secret_key_read(path, key) == 0)
        return 0;
    if (errno != ENOENT)
        return -1;
    struct secret_key fresh;
    if (RAND_bytes(fresh.bytes, SECRET_KEY_BYTES) != 1) {
        errno = EIO;
        return -1;
    }
    /* Written whole under a temporary name, then linked to its own (which fails if
     * another process got there first: then that one's key is the key). */
    char tmp[PATH_MAX];
    unsigned char r[4];
    if (RAND_bytes(r, sizeof r) != 1 ||
        snprintf(tmp, sizeof tmp, "%s.new-%ld-%02x%02x%02x%02x", path, (long)getpid(), r[0], r[1], r[2],
                 r[3]) >= (int)sizeof tmp) {
        secret_key_wipe(&fresh);
        errno = ENAMETOOLONG;
        return -1;
    }
    int rc = -1;
    if (key_write_new(tmp, &fresh) != 0)
        goto out;
    if (link(tmp, path) == 0) {
        *key = fresh;
        rc = 1;
    } else if (errno == EEXIST) {
        rc = secret_key_read(path, key) == 0 ? 0 : -1;
    } else if (key_write_new(path, &fresh) == 0) {
        *key = fresh;               /* a file system without hard links */
        rc = 1;
    } else if (errno == EEXIST) {
        rc = secret_key_read(path, key) == 0 ? 0 : -1;
    }
    int e = errno;
    unlink(tmp);
    errno = e;
out:
    secret_key_wipe(&fresh);
    return rc;
}

int secret_key_path(const char *key_file, const char *database, char *out, size_t cap)
{
    int n;
    if (key_file && *key_file) {
        n = snprintf(out, cap, "%s", key_file);
    } else {
        /* a server's database has no folder beside it: secrets.key_file names the key */
        if (!database || !*database || sdb_is_url(database))
            return -1;
        const char *slash = strrchr(database, '/');
        if (!slash)
            n = snprintf(out, cap, "%s", SECRET_KEY_FILE_NAME);
        else
            n = snprintf(out, cap, "%.*s/%s", (int)(slash - database), database, SECRET_KEY_FILE_NAME);
    }
    return n >= 0 && (size_t)n < cap ? 0 : -1;
}

/* ---- the process's key ---- */

static pthread_mutex_t proc_lock = PTHREAD_MUTEX_INITIALIZER;
static char proc_key_file[PATH_MAX];  /* configured; "" = beside the database */
static char proc_path[PATH_MAX];      /* the loaded key's file; "" = none loaded yet */
static struct secret_key proc_key;    /* valid once proc_path is set; never changes then */
static int proc_warned;               /* a failure to read or make the key was logged */
#define LOGGED_MAX 256
static int64_t logged_ids[LOGGED_MAX];/* endpoints whose unopenable credential was logged */
static int n_logged;
static int warned_clear;              /* a clear (legacy) credential was seen and logged */

void secret_use_key_file(const char *key_file)
{
    pthread_mutex_lock(&proc_lock);
    snprintf(proc_key_file, sizeof proc_key_file, "%s", key_file ? key_file : "");
    pthread_mutex_unlock(&proc_lock);
}

const struct secret_key *secret_process_key(const char *database, int create, char *path, size_t cap)
{
    char want[PATH_MAX];
    const struct secret_key *res = NULL;
    pthread_mutex_lock(&proc_lock);
    if (secret_key_path(proc_key_file, database, want, sizeof want) != 0) {
        want[0] = '\0';
        if (!proc_warned++)
            log_error("no key file for database %s: set secrets.key_file (sluicectl --key-file); a database on a"
                      " server has no folder to keep the key beside", database ? database : "(on a server)");
        goto out;
    }
    if (proc_path[0]) {
        if (strcmp(proc_path, want) == 0)
            res = &proc_key;
        else if (!proc_warned++)
            log_error("key file %s asked for after %s: one key file per process", want, proc_path);
        goto out;
    }
    struct secret_key k;
    int rc = create ? secret_key_create(want, &k) : secret_key_read(want, &k);
    if (rc >= 0) {
        proc_key = k;
        snprintf(proc_path, sizeof proc_path, "%s", want);
        res = &proc_key;
        if (rc == 1)
            log_info("created the key file %s (R-SEC-9)", want);
    } else if (create || errno != ENOENT) {
        if (!proc_warned++)
            log_error("cannot %s the key file %s: %s", create ? "read or create" : "read", want,
                      errno == EINVAL ? "it holds no key (32 bytes, or 64 hex characters)" : strerror(errno));
    }
    secret_key_wipe(&k);
out:
    if (path)
        snprintf(path, cap, "%s", want);
    pthread_mutex_unlock(&proc_lock);
    return res;
}

/* 1 the first time an endpoint id is seen here (then its failure is logged), else 0. */
static int first_failure(int64_t id)
{
    int first = 1;
    pthread_mutex_lock(&proc_lock);
    for (int i = 0; i < n_logged && first; i++)
        first = logged_ids[i] != id;
    if (first && n_logged < LOGGED_MAX)
        logged_ids[n_logged++] = id;
    pthread_mutex_unlock(&proc_lock);
    return first;
}

char *secret_open_endpoint(const char *database, int64_t id, const char *name, const char *stored)
{
    if (!stored || !*stored)
        return NULL;
    char path[PATH_MAX] = "", aad[SECRET_AAD_MAX];
    const struct secret_key *key = NULL;
    if (secret_is_sealed(stored))
        key = secret_process_key(database, 0, path, sizeof path);
    secret_aad_endpoint(id, aad);
    char *plain = NULL;
    enum secret_result rc = secret_open(key, stored, aad, &plain);
    if (rc == SECRET_OK && !*plain) {
        secret_free(plain);
        return NULL;
    }
    if (!secret_is_sealed(stored)) {
        pthread_mutex_lock(&proc_lock);
        int first = !warned_clear++;
        pthread_mutex_unlock(&proc_lock);
        if (first)
            log_warn("endpoint %s (id %" PRId64 "): its upstream credential is stored in clear; "
                     "`sluicectl init` seals every such value", name ? name : "?", id);
    }
    if (rc != SECRET_OK && first_failure(id))
        log_error("endpoint %s (id %" PRId64 "): its upstream credential cannot be opened (%s %s); "
                  "it is not sent", name ? name : "?", id,
                  rc == SECRET_NO_KEY ? "no key in" : "not sealed with the key in", path);
    return plain;
}
