/* util.c: small helpers with no state. */
#include "util.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    /* strtoll would accept leading blanks and '+'; a whole-string parse does not. */
    if (!s || !(*s == '-' || (*s >= '0' && *s <= '9')))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* OpenSSL 3 looks the algorithm up (under a lock) on every EVP_sha256() use;
 * fetch it once per process instead. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;
static void sha256_fetch(void) { sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL); }

void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    pthread_once(&sha256_once, sha256_fetch);
    EVP_Digest(data, len, md, &mdlen, sha256_md ? sha256_md : EVP_sha256(), NULL);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

void random_token(char *out, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char buf[256];
    size_t i = 0;
    while (i < n) {
        size_t want = n - i > sizeof buf ? sizeof buf : n - i;
        if (RAND_bytes(buf, (int)want) != 1)
            abort();
        for (size_t j = 0; j < want; j++) {
            if (buf[j] >= 248)      /* 248 = 4 * 62: reject to avoid modulo bias */
                continue;
            out[i++] = alphabet[buf[j] % 62];
        }
    }
    out[n] = '\0';
}

int ct_equal(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

/* A request asks for its day a few times: the last second's answer is kept per
 * thread (localtime_r and snprintf are most of the cost), for the time zone
 * tzset last read (its offset and name). */
void day_string(int64_t epoch_ms, char out[11])
{
    static __thread int64_t cached_sec = INT64_MIN;
    static __thread long cached_zone;
    static __thread const char *cached_name;
    static __thread char cached[11];
    int64_t sec = epoch_ms / 1000;
    if (sec != cached_sec || timezone != cached_zone || tzname[0] != cached_name) {
        time_t t = (time_t)sec;
        struct tm tm;
        localtime_r(&t, &tm);
        int y = (tm.tm_year + 1900) % 10000, m = (tm.tm_mon + 1) % 100, d = tm.tm_mday % 100;
        if (y < 0)
            y = 0;
        snprintf(cached, sizeof cached, "%04u-%02u-%02u", (unsigned)y, (unsigned)m, (unsigned)d);
        cached_sec = sec;
        cached_zone = timezone;
        cached_name = tzname[0];
    }
    memcpy(out, cached, 11);
}

size_t fmt_i64(char *out, int64_t v)
{
    char tmp[20];
    size_t n = 0, o = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        out[o++] = '-';
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n)
        out[o++] = tmp[--n];
    return o;
}

void str_copy(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

void thread_background(void)
{
    /* Linux: a thread id names one thread to setpriority. */
    setpriority(PRIO_PROCESS, (id_t)gettid(), 5);
}
