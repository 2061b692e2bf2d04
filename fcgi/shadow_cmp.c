/* shadow_cmp.c: the pure parts of shadow traffic (R-SHD-1): mirror or not,
 * read a mirror's answer, compare it with the client's. */
#include "shadow_cmp.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

static uint64_t fnv1a(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

#define FNV_OFFSET 14695981039346656037ULL

int shadow_wanted(int percent, const char *request_id)
{
    if (percent <= 0)
        return 0;
    if (percent >= 100)
        return 1;
    uint64_t h = fnv1a(FNV_OFFSET, request_id ? request_id : "", request_id ? strlen(request_id) : 0);
    /* the high bits: FNV's low bits of short, similar ids are poorly mixed */
    return (int)((h >> 32) % 100) < percent;
}

void shadow_reader_init(struct shadow_reader *rd, enum shadow_shape shape, int stream, size_t max_event,
                        size_t max_body)
{
    memset(rd, 0, sizeof *rd);
    rd->shape = shape;
    rd->stream = stream;
    sse_init(&rd->sse, max_event);
    buf_init(&rd->body, max_body);
}

void shadow_reader_free(struct shadow_reader *rd)
{
    sse_free(&rd->sse);
    buf_free(&rd->body);
}

static int64_t obj_i64(struct json_object *o, const char *k)
{
    struct json_object *v;
    return o && json_object_object_get_ex(o, k, &v) ? json_object_get_int64(v) : 0;
}

static struct json_object *obj_get(struct json_object *o, const char *k)
{
    struct json_object *v = NULL;
    return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

/* Anthropic usage: input is input + cache reads + cache writes (as account counts it). */
static void anthropic_usage(struct json_object *u, struct usage *out)
{
    if (!u || !json_object_is_type(u, json_type_object))
        return;
    int64_t in = obj_i64(u, "input_tokens") + obj_i64(u, "cache_read_input_tokens") +
                 obj_i64(u, "cache_creation_input_tokens");
    if (in > 0)
        out->prompt_tokens = in;
    if (obj_get(u, "output_tokens"))
        out->completion_tokens = obj_i64(u, "output_tokens");
    out->found = 1;
}

/* One Anthropic stream event: 1 when it carried content. */
static int anthropic_event(struct shadow_reader *rd, const struct sse_event *ev)
{
    struct json_object *o = json_tokener_parse(ev->data);
    if (!o)
        return 0;
    const char *type = json_object_get_string(obj_get(o, "type"));
    int content = 0;
    if (!type)
        ;
    else if (strcmp(type, "message_start") == 0)
        anthropic_usage(obj_get(obj_get(o, "message"), "usage"), &rd->u);
    else if (strcmp(type, "message_delta") == 0)
        anthropic_usage(obj_get(o, "usage"), &rd->u);
    else if (strcmp(type, "content_block_delta") == 0)
        content = 1;
    else if (strcmp(type, "message_stop") == 0)
        rd->done = 1;
    else if (strcmp(type, "error") == 0)
        rd->failed = 1;
    json_object_put(o);
    return content;
}

static int openai_event(struct shadow_reader *rd, const struct sse_event *ev)
{
    struct usage u = {0};
    enum chunk_kind k = usage_classify_chunk(ev->data, ev->data_len, &u);
    if (u.found)
        rd->u = u;
    if (k == CHUNK_DONE)
        rd->done = 1;
    else if (k == CHUNK_ERROR)
        rd->failed = 1;
    return k == CHUNK_CONTENT;
}

int shadow_reader_feed(struct shadow_reader *rd, const char *p, size_t n)
{
    if (!rd->stream) {
        if (!rd->overflow && buf_append(&rd->body, p, n) != 0)
            rd->overflow = 1;
        return 0;
    }
    if (sse_feed(&rd->sse, p, n) != 0) {
        rd->failed = 1;
        return 0;
    }
    int content = 0;
    struct sse_event ev;
    int rc;
    while ((rc = sse_next(&rd->sse, &ev)) == 1) {
        if (ev.comment_only || !ev.has_data)
            continue;
        int c = rd->shape == SHADOW_ANTHROPIC ? anthropic_event(rd, &ev) : openai_event(rd, &ev);
        content += c;
        rd->content_events += c;
    }
    if (rc < 0)
        rd->failed = 1;
    return content;
}

static uint64_t text_add(uint64_t h, size_t *n, struct json_object *s)
{
    if (!s || !json_object_is_type(s, json_type_string))
        return h;
    size_t len = (size_t)json_object_get_string_len(s);
    *n += len;
    return fnv1a(h, json_object_get_string(s), len);
}

int shadow_text_hash(enum shadow_shape shape, const char *json, size_t len, uint64_t *hash, size_t *n)
{
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return 0;
    struct json_object *o = json_tokener_parse_ex(tok, json, (int)len);
    json_tokener_free(tok);
    if (!o)
        return 0;
    uint64_t h = FNV_OFFSET;
    size_t total = 0;
    int found = 0;
    struct json_object *arr = obj_get(o, shape == SHADOW_ANTHROPIC ? "content" : "choices");
    if (arr && json_object_is_type(arr, json_type_array)) {
        found = 1;
        size_t k = json_object_array_length(arr);
        for (size_t i = 0; i < k; i++) {
            struct json_object *e = json_object_array_get_idx(arr, i);
            if (shape == SHADOW_ANTHROPIC) {
                const char *t = json_object_get_string(obj_get(e, "type"));
                if (t && strcmp(t, "text") == 0)
                    h = text_add(h, &total, obj_get(e, "text"));
            } else {
                struct json_object *m = obj_get(e, "message");
                h = text_add(h, &total, m ? obj_get(m, "content") : obj_get(e, "text"));
            }
        }
    }
    json_object_put(o);
    *hash = h;
    *n = total;
    return found;
}

void shadow_reader_end(struct shadow_reader *rd, long status)
{
    if (rd->stream) {
        struct sse_event ev;
        sse_finish(&rd->sse, &ev);
        return;
    }
    if (rd->overflow || !rd->body.len)
        return;
    if (rd->shape == SHADOW_ANTHROPIC) {
        struct json_object *o = json_tokener_parse(rd->body.data);
        if (o) {
            anthropic_usage(obj_get(o, "usage"), &rd->u);
            json_object_put(o);
        }
    } else {
        usage_from_body(rd->body.data, rd->body.len, &rd->u);
    }
    if (status >= 200 && status < 300)
        rd->has_text = shadow_text_hash(rd->shape, rd->body.data, rd->body.len, &rd->text_hash, &rd->text_len);
}

const char *shadow_outcome(int timed_out, long status, int transport_ok, const struct shadow_reader *rd)
{
    if (timed_out)
        return "timeout";
    if (!transport_ok || status < 200 || status >= 300 || rd->failed || rd->overflow)
        return "error";
    if (rd->stream && !rd->done)
        return "error";         /* the stream ended before its end event: it died mid-way */
    return "ok";
}

static int ok_status(int s)
{
    return s >= 200 && s < 300;
}

void shadow_compare(const struct shadow_side *client, const struct shadow_side *mirror, struct shadow_cmp *out)
{
    memset(out, 0, sizeof *out);
    out->status_match = client->status == mirror->status || (ok_status(client->status) && ok_status(mirror->status));
    out->token_ratio = client->completion_tokens > 0
                       ? (double)mirror->completion_tokens / (double)client->completion_tokens : -1;
    out->ttft_known = client->ttft_us > 0 && mirror->ttft_us > 0;
    out->ttft_delta_us = out->ttft_known ? mirror->ttft_us - client->ttft_us : 0;
    out->latency_delta_us = mirror->latency_us - client->latency_us;
    out->exact = client->has_text && mirror->has_text
                 ? client->text_hash == mirror->text_hash && client->text_len == mirror->text_len : -1;
}

void shadow_cmp_format(const struct shadow_cmp *c, const struct shadow_side *client, const struct shadow_side *mirror,
                       char *out, size_t cap)
{
    char ratio[32], ttft[32];
    if (c->token_ratio < 0)
        snprintf(ratio, sizeof ratio, "na");
    else
        snprintf(ratio, sizeof ratio, "%.3f", c->token_ratio);
    if (c->ttft_known)
        snprintf(ttft, sizeof ttft, "%lld", (long long)(c->ttft_delta_us / 1000));
    else
        snprintf(ttft, sizeof ttft, "na");
    snprintf(out, cap,
             "status_match=%d status=%d/%d completion_tokens=%lld/%lld token_ratio=%s ttft_delta_ms=%s"
             " latency_delta_ms=%lld exact_match=%s",
             c->status_match, client->status, mirror->status, (long long)client->completion_tokens,
             (long long)mirror->completion_tokens, ratio, ttft, (long long)(c->latency_delta_us / 1000),
             c->exact < 0 ? "na" : c->exact ? "1" : "0");
}
