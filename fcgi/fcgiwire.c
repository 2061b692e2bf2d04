/* fcgiwire.c: FastCGI 1.0 record headers and name-value pairs (see fcgiwire.h). */
#include "fcgiwire.h"

#include <string.h>

void fcgi_header_parse(const unsigned char *p, struct fcgi_header *h)
{
    h->version = p[0];
    h->type = p[1];
    h->id = (unsigned)p[2] << 8 | p[3];
    h->content = (size_t)p[4] << 8 | p[5];
    h->padding = p[6];
}

void fcgi_header_put(unsigned char *p, int type, unsigned id, size_t content)
{
    p[0] = FCGI_VERSION_1;
    p[1] = (unsigned char)type;
    p[2] = (unsigned char)(id >> 8);
    p[3] = (unsigned char)id;
    p[4] = (unsigned char)(content >> 8);
    p[5] = (unsigned char)content;
    p[6] = 0;
    p[7] = 0;
}

void fcgi_end_body_put(unsigned char *p, uint32_t app_status, int protocol_status)
{
    p[0] = (unsigned char)(app_status >> 24);
    p[1] = (unsigned char)(app_status >> 16);
    p[2] = (unsigned char)(app_status >> 8);
    p[3] = (unsigned char)app_status;
    p[4] = (unsigned char)protocol_status;
    p[5] = p[6] = p[7] = 0;
}

/* A length is one byte below 128, else four with the top bit set. */
static int length_parse(const unsigned char *p, size_t n, size_t *len, size_t *used)
{
    if (n < 1)
        return 0;
    if (!(p[0] & 0x80)) {
        *len = p[0];
        *used = 1;
        return 1;
    }
    if (n < 4)
        return 0;
    *len = (size_t)(p[0] & 0x7f) << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
    *used = 4;
    return 1;
}

int fcgi_pair_parse(const unsigned char *p, size_t n, size_t *name_off, size_t *name_len, size_t *value_off,
                    size_t *value_len)
{
    size_t a, b, ua, ub;
    if (length_parse(p, n, &a, &ua) <= 0 || length_parse(p + ua, n - ua, &b, &ub) <= 0)
        return 0;
    size_t head = ua + ub;
    if (a > n - head || b > n - head - a)
        return 0;
    *name_off = head;
    *name_len = a;
    *value_off = head + a;
    *value_len = b;
    return 1;
}

static size_t length_put(unsigned char *p, size_t len)
{
    if (len < 128) {
        p[0] = (unsigned char)len;
        return 1;
    }
    p[0] = (unsigned char)(0x80 | (len >> 24));
    p[1] = (unsigned char)(len >> 16);
    p[2] = (unsigned char)(len >> 8);
    p[3] = (unsigned char)len;
    return 4;
}

size_t fcgi_pair_put(unsigned char *out, size_t room, const char *name, size_t name_len, const char *value,
                     size_t value_len)
{
    size_t need = (name_len < 128 ? 1 : 4) + (value_len < 128 ? 1 : 4) + name_len + value_len;
    if (need > room || name_len > 0x7fffffff || value_len > 0x7fffffff)
        return 0;
    size_t n = length_put(out, name_len);
    n += length_put(out + n, value_len);
    memcpy(out + n, name, name_len);
    memcpy(out + n + name_len, value, value_len);
    return need;
}
