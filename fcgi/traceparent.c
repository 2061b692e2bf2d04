/* traceparent.c: W3C Trace Context (traceparent.h). The rules are the
 * spec's "Processing model": anything that does not parse is ignored and a
 * fresh trace starts, so a malformed header can never break a request. */
#include "traceparent.h"

#include <string.h>

/* n lowercase hex digits (the spec's HEXDIGLC: uppercase is invalid). */
static int hex_lc(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return 1;
}

static int all_zero(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != '0')
            return 0;
    return 1;
}

static int hex_val(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* "vv-" 32 "-" 16 "-" "ff": the four fields of version 00 take 55 bytes. */
#define TP_LEN 55

int traceparent_parse(const char *value, char trace_id[33], char span_id[17], int *flags)
{
    if (!value)
        return -1;
    size_t n = strlen(value);
    if (n < TP_LEN || !hex_lc(value, 2) || value[2] != '-' || value[35] != '-' || value[52] != '-')
        return -1;
    if (value[0] == 'f' && value[1] == 'f')
        return -1;                  /* version 255 is forbidden */
    int v00 = value[0] == '0' && value[1] == '0';
    /* Version 00 is exactly 55 bytes; a later version may append fields, each
     * after a '-', and is read for the four fields 00 defines. */
    if (v00 ? n != TP_LEN : (n > TP_LEN && value[TP_LEN] != '-'))
        return -1;
    const char *tid = value + 3, *sid = value + 36, *fl = value + 53;
    if (!hex_lc(tid, 32) || !hex_lc(sid, 16) || !hex_lc(fl, 2) || all_zero(tid, 32) || all_zero(sid, 16))
        return -1;
    memcpy(trace_id, tid, 32);
    trace_id[32] = '\0';
    memcpy(span_id, sid, 16);
    span_id[16] = '\0';
    *flags = hex_val(fl[0]) << 4 | hex_val(fl[1]);
    return 0;
}

/* Appends s to out[0..*n), at most up to 55 bytes in all (what snprintf(out, 56) keeps). */
static void put(char *out, size_t *n, const char *s, size_t len)
{
    if (len > 55 - *n)
        len = 55 - *n;
    memcpy(out + *n, s, len);
    *n += len;
}

/* By hand, not snprintf: it is on every forwarded request, and the format cost a
 * third of what the rest of an attempt's setup does (issue 17). Same bytes. */
void traceparent_format(char out[56], const char *trace_id, const char *span_id, int flags)
{
    static const char hex[] = "0123456789abcdef";
    char f[2] = {hex[(flags >> 4) & 0xf], hex[flags & 0xf]};
    size_t n = 0;
    put(out, &n, "00-", 3);
    put(out, &n, trace_id, strlen(trace_id));
    put(out, &n, "-", 1);
    put(out, &n, span_id, strlen(span_id));
    put(out, &n, "-", 1);
    put(out, &n, f, 2);
    out[n] = '\0';
}
