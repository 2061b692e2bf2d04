/* fake_http.c: read and parse HTTP/1.x requests (framing, chunked bodies, pipelining) and echo them as JSON. */
#include "fake.h"

#include <ctype.h>

const struct hdr *http_header(const struct request *r, const char *name)
{
    for (int i = 0; i < r->nh; i++)
        if (mem_case_is(r->h[i].name, r->h[i].nlen, name))
            return &r->h[i];
    return NULL;
}

/* True if the comma-separated header value lists token (case-insensitive). */
static bool value_has_token(const char *v, size_t n, const char *token, bool last_only)
{
    const char *end = v + n;
    bool found = false;
    while (v < end) {
        while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
            v++;
        const char *t = v;
        while (v < end && *v != ',')
            v++;
        const char *te = v;
        while (te > t && (te[-1] == ' ' || te[-1] == '\t'))
            te--;
        if (te == t)
            continue;
        bool match = mem_case_is(t, (size_t)(te - t), token);
        found = last_only ? match : (found || match);
    }
    return found;
}

static bool is_tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int request_line_parse(struct request *r, const char *s, const char *e)
{
    const char *sp1 = memchr(s, ' ', (size_t)(e - s));
    if (!sp1 || sp1 == s)
        return 400;
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', (size_t)(e - t));
    if (!sp2 || sp2 == t || e - sp2 != 9 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)sp2[8]))
        return 400;
    for (const char *m = s; m < sp1; m++)
        if (!is_tchar((unsigned char)*m))
            return 400;
    r->method = s;
    r->mlen = (size_t)(sp1 - s);
    r->is_head = mem_is(s, r->mlen, "HEAD");
    r->minor = sp2[8] - '0';
    r->path = t;
    const char *q = memchr(t, '?', (size_t)(sp2 - t));
    r->plen = (size_t)((q ? q : sp2) - t);
    r->query = q ? q + 1 : sp2;
    r->qlen = q ? (size_t)(sp2 - q - 1) : 0;
    return 0;
}

static int header_parse(struct request *r, const char *s, const char *e)
{
    const char *colon = memchr(s, ':', (size_t)(e - s));
    if (!colon || colon == s)
        return 400;
    for (const char *p = s; p < colon; p++)
        if (!is_tchar((unsigned char)*p))
            return 400;   /* also rejects obsolete line folding */
    if (r->nh == HDRS_MAX)
        return 431;
    const char *v = colon + 1;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    r->h[r->nh++] = (struct hdr){ s, v, (size_t)(colon - s), (size_t)(e - v) };
    return 0;
}

/* Parses p[0..n), which ends in a blank line; returns 0 or an HTTP error status. */
int http_head_parse(struct request *r, const char *p, size_t n)
{
    const char *end = p + n;
    const char *eol = memchr(p, '\n', n);
    const char *le = (eol > p && eol[-1] == '\r') ? eol - 1 : eol;
    r->nh = 0;
    int rc = request_line_parse(r, p, le);
    for (const char *s = eol + 1; rc == 0 && s < end; s = eol + 1) {
        eol = memchr(s, '\n', (size_t)(end - s));
        le = (eol > s && eol[-1] == '\r') ? eol - 1 : eol;
        if (le == s)
            break;
        rc = header_parse(r, s, le);
    }
    return rc;
}

static int framing_header(const struct hdr *h, struct framing *f)
{
    if (mem_case_is(h->name, h->nlen, "content-length")) {
        long v;
        if (h->vlen > 18 || !isdigit((unsigned char)h->val[0]) || parse_long(h->val, h->vlen, &v) < 0)
            return 400;
        if (f->clen >= 0 && f->clen != v)
            return 400;
        f->clen = v;
    } else if (mem_case_is(h->name, h->nlen, "transfer-encoding")) {
        if (!value_has_token(h->val, h->vlen, "chunked", true))
            return 501;
        f->chunked = true;
    } else if (mem_case_is(h->name, h->nlen, "expect")) {
        f->expect = value_has_token(h->val, h->vlen, "100-continue", false);
    } else if (mem_case_is(h->name, h->nlen, "connection")) {
        f->close |= value_has_token(h->val, h->vlen, "close", false);
        f->keep |= value_has_token(h->val, h->vlen, "keep-alive", false);
    }
    return 0;
}

int http_framing_get(struct request *r, struct framing *f)
{
    *f = (struct framing){ .clen = -1 };
    for (int i = 0; i < r->nh; i++) {
        int rc = framing_header(&r->h[i], f);
        if (rc)
            return rc;
    }
    r->keep_alive = r->minor >= 1 ? !f->close : (f->keep && !f->close);
    if (f->chunked && f->clen >= 0)
        r->keep_alive = false;   /* both framings: RFC 9112 says close after answering */
    if (!f->chunked && f->clen > BODY_MAX)
        return 413;
    return 0;
}

/* ---- reading a request ---- */

/* End of the head (just past the blank line) in p[0..n), searching from `from`; 0 if absent. */
size_t http_head_find_end(const char *p, size_t n, size_t from)
{
    const char *s = p + from, *end = p + n;
    while ((s = memchr(s, '\n', (size_t)(end - s))) != NULL) {
        if (s + 1 < end && s[1] == '\n')
            return (size_t)(s + 2 - p);
        if (s + 2 < end && s[1] == '\r' && s[2] == '\n')
            return (size_t)(s + 3 - p);
        s++;
    }
    return 0;
}

/* Clients may send a stray CRLF after a body; RFC 9112 says to ignore it. */
void http_head_skip_blank(struct conn *c)
{
    size_t k = 0;
    while (k < c->in_len && (c->in[k] == '\r' || c->in[k] == '\n'))
        k++;
    if (k == 0)
        return;
    memmove(c->in, c->in + k, c->in_len - k);
    c->in_len -= k;
    c->scanned = 0;
}

static int head_read(struct conn *c)
{
    for (;;) {
        http_head_skip_blank(c);
        size_t end = c->in_len ? http_head_find_end(c->in, c->in_len, c->scanned) : 0;
        if (end) {
            c->req.head_len = end;
            return end > HEAD_MAX ? 431 : 0;
        }
        if (c->in_len >= HEAD_MAX)
            return 431;
        c->scanned = c->in_len > 2 ? c->in_len - 2 : 0;
        if (conn_fill(c, HEAD_MAX) <= 0)
            return -1;
    }
}

static int body_read_length(struct conn *c, size_t clen)
{
    size_t need = c->req.head_len + clen;
    if (c->in_cap < need) {
        c->in = xrealloc(c->in, need);
        c->in_cap = need;
    }
    while (c->in_len < need)
        if (conn_fill(c, need) <= 0)
            return -1;
    c->req.body = c->in + c->req.head_len;
    c->req.blen = clen;
    c->req.total_len = need;
    return 0;
}

enum step { STEP_MORE, STEP_NEED, STEP_DONE, STEP_BAD, STEP_BIG };

/* Decodes one "size CRLF data CRLF" unit at *pos. */
static enum step chunk_step(struct conn *c, size_t *pos, bool *last)
{
    const char *s = c->in + *pos, *end = c->in + c->in_len;
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl)
        return end - s > CHUNK_LINE_MAX ? STEP_BAD : STEP_NEED;
    size_t size = 0;
    const char *p = s;
    for (; p < nl && isxdigit((unsigned char)*p); p++) {
        size = size * 16 + (size_t)(isdigit((unsigned char)*p) ? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10));
        if (size > BODY_MAX)
            return STEP_BIG;
    }
    if (p == s || (p < nl && *p != ';' && *p != ' ' && *p != '\t' && *p != '\r'))
        return STEP_BAD;
    size_t data = (size_t)(nl + 1 - c->in);
    if (size == 0) {
        *pos = data;
        *last = true;
        return STEP_MORE;
    }
    if (c->chunked.len + size > BODY_MAX)
        return STEP_BIG;
    if (c->in_len < data + size + 2)
        return STEP_NEED;
    if (c->in[data + size] != '\r' || c->in[data + size + 1] != '\n')
        return STEP_BAD;
    buf_add(&c->chunked, c->in + data, size);
    *pos = data + size + 2;
    return STEP_MORE;
}

/* Skips one trailer line; the blank line ends the body. */
static enum step chunk_trailer(struct conn *c, size_t *pos)
{
    const char *s = c->in + *pos, *end = c->in + c->in_len;
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl)
        return end - s > CHUNK_LINE_MAX ? STEP_BAD : STEP_NEED;
    *pos = (size_t)(nl + 1 - c->in);
    return (nl == s || (nl == s + 1 && s[0] == '\r')) ? STEP_DONE : STEP_MORE;
}

static int body_read_chunked(struct conn *c)
{
    size_t pos = c->req.head_len;
    bool last = false;
    c->chunked.len = 0;
    for (;;) {
        enum step st = last ? chunk_trailer(c, &pos) : chunk_step(c, &pos, &last);
        if (st == STEP_DONE)
            break;
        if (st == STEP_BAD || st == STEP_BIG)
            return st == STEP_BAD ? 400 : 413;
        if (st == STEP_NEED && conn_fill(c, IN_MAX) <= 0)
            return c->in_len == c->in_cap && c->in_cap >= IN_MAX ? 413 : -1;
    }
    c->req.body = c->chunked.len ? c->chunked.p : "";
    c->req.blen = c->chunked.len;
    c->req.total_len = pos;
    return 0;
}

/* Reads one request into c->req; 0 ok, -1 connection gone, else the HTTP error status to answer. */
int http_read(struct conn *c)
{
    struct request *r = &c->req;
    r->nh = 0;
    r->keep_alive = false;
    r->minor = 1;
    int rc = head_read(c);
    if (rc == 0)
        rc = http_head_parse(r, c->in, r->head_len);
    struct framing f;
    if (rc == 0)
        rc = http_framing_get(r, &f);
    if (rc)
        return rc;
    bool waiting = f.chunked ? c->in_len == r->head_len : c->in_len < r->head_len + (size_t)(f.clen > 0 ? f.clen : 0);
    /* curl waits a second for this before sending a large body anyway */
    if (f.expect && waiting && r->minor >= 1 && conn_send(c, CONTINUE_100, sizeof CONTINUE_100 - 1) < 0)
        return -1;
    const char *before = c->in;
    rc = f.chunked ? body_read_chunked(c) : body_read_length(c, (size_t)(f.clen > 0 ? f.clen : 0));
    if (rc == 0 && c->in != before)
        http_head_parse(r, c->in, r->head_len);   /* the buffer moved: re-point the header fields */
    return rc;
}

/* Drops the request just served, keeping any pipelined bytes that follow it. */
void http_consume(struct conn *c)
{
    size_t used = c->req.total_len, left = c->in_len - used;
    memmove(c->in, c->in + used, left);
    c->in_len = left;
    c->scanned = 0;
    if (c->in_cap > BUF_KEEP && left <= 16384) {
        c->in_cap = 16384;
        c->in = xrealloc(c->in, c->in_cap);
    }
    buf_trim(&c->chunked);
    buf_trim(&c->rbody);
    buf_trim(&c->out);
}

/* ---- request as JSON (/echo and /_fake/stats) ---- */

static bool header_seen_before(const struct request *r, int i)
{
    for (int j = 0; j < i; j++)
        if (r->h[j].nlen == r->h[i].nlen && strncasecmp(r->h[j].name, r->h[i].name, r->h[i].nlen) == 0)
            return true;
    return false;
}

/* Header names are lowercased; repeated headers are joined with ", " as HTTP allows. */
static void headers_json(struct buf *o, const struct request *r)
{
    buf_add(o, "{", 1);
    bool first = true;
    for (int i = 0; i < r->nh; i++) {
        if (header_seen_before(r, i))
            continue;
        buf_adds(o, first ? "\"" : ",\"");
        first = false;
        buf_reserve(o, r->h[i].nlen);
        for (size_t k = 0; k < r->h[i].nlen; k++)   /* names are tokens: nothing to escape */
            o->p[o->len++] = (char)tolower((unsigned char)r->h[i].name[k]);
        buf_adds(o, "\":\"");
        bool more = false;
        for (int j = i; j < r->nh; j++) {
            if (r->h[j].nlen != r->h[i].nlen || strncasecmp(r->h[j].name, r->h[i].name, r->h[i].nlen) != 0)
                continue;
            if (more)
                buf_add(o, ", ", 2);
            more = true;
            json_put_chars(o, r->h[j].val, r->h[j].vlen);
        }
        buf_add(o, "\"", 1);
    }
    buf_add(o, "}", 1);
}

void http_request_json(struct buf *o, const struct request *r, const char *body, size_t blen)
{
    buf_adds(o, "{\"method\":");
    json_put_str(o, r->method, r->mlen);
    buf_adds(o, ",\"path\":");
    json_put_str(o, r->path, r->plen);
    buf_adds(o, ",\"query\":");
    json_put_str(o, r->query, r->qlen);
    buf_adds(o, ",\"headers\":");
    headers_json(o, r);
    buf_adds(o, ",\"body\":");
    json_put_str(o, body, blen);
    buf_add(o, "}", 1);
}
