/* fake_anthropic_req.c: read a Messages request as strictly as the real API does, keeping what the answer needs. */
#include "fake.h"

#include <stdarg.h>
#include <stdio.h>

static const char TOOL_TRIGGER[] = "use the tool";   /* in the last user turn's text: answer with a tool call */
static const char BAD_JSON[] = "There was an error parsing the body of your request";

__attribute__((format(printf, 2, 3)))
static int fail(struct anthropic_req *q, const char *fmt, ...)
{
    if (!q->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(q->err, sizeof q->err, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A list of blocks whose text counts as prompt words: system (text only) and tool_result content. */
static int text_list(struct jscan *j, struct anthropic_req *q, const char *where, bool text_only)
{
    int i = 0;
    if (js_peek(j) != '[')
        return fail(q, "%s: Input should be a valid list", where);
    for (int r = js_open(j, '['); r != 0; r = js_more(j, ']'), i++) {
        struct jval type = { 0 }, text = { 0 }, k, v;
        if (r < 0 || js_peek(j) != '{')
            return fail(q, "%s.%d: Input should be a valid dictionary", where, i);
        for (int m = js_open(j, '{'); m != 0; m = js_more(j, '}')) {
            if (m < 0 || !js_key(j, &k) || js_read(j, &v) == JT_ERR)
                return fail(q, "%s", BAD_JSON);
            if (mem_is(k.s, k.n, "type"))
                type = v;
            else if (mem_is(k.s, k.n, "text"))
                text = v;
        }
        if (type.t != JT_STR)
            return fail(q, "%s.%d.type: Field required", where, i);
        if (text_only && !js_is(&type, "text"))
            return fail(q, "%s.%d.type: Input should be 'text'", where, i);
        if (js_is(&type, "text") && text.t != JT_STR)
            return fail(q, "%s.%d.text: Field required", where, i);
        q->words += text.t == JT_STR ? js_words(text.s, text.n) : 0;
    }
    return 0;
}

static void user_text(struct anthropic_req *q, const struct jval *t)
{
    q->words += js_words(t->s, t->n);
    if (q->user_turn && memmem(t->s, t->n, TOOL_TRIGGER, sizeof TOOL_TRIGGER - 1))
        q->asks = true;
}

/* One block of messages[mi].content; tool_use belongs to assistants, tool_result to users. */
static int block_parse(struct jscan *j, struct anthropic_req *q, int mi, int bi)
{
    char where[64], sub[80];
    snprintf(where, sizeof where, "messages.%d.content.%d", mi, bi);
    struct jval type = { 0 }, text = { 0 }, id = { 0 }, name = { 0 }, input = { 0 }, content = { 0 }, k, v;
    if (js_peek(j) != '{')
        return fail(q, "%s: Input should be a valid dictionary", where);
    for (int r = js_open(j, '{'); r != 0; r = js_more(j, '}')) {
        if (r < 0 || !js_key(j, &k))
            return fail(q, "%s", BAD_JSON);
        if (mem_is(k.s, k.n, "content") && js_peek(j) == '[') {
            const char *s = j->p;
            snprintf(sub, sizeof sub, "%s.content", where);
            if (text_list(j, q, sub, false) < 0)
                return -1;
            content = (struct jval){ .t = JT_ARR, .s = s, .n = (size_t)(j->p - s) };
            continue;
        }
        if (js_read(j, &v) == JT_ERR)
            return fail(q, "%s", BAD_JSON);
        struct jval *dst = mem_is(k.s, k.n, "type") ? &type : mem_is(k.s, k.n, "text") ? &text
                         : mem_is(k.s, k.n, "id") || mem_is(k.s, k.n, "tool_use_id") ? &id
                         : mem_is(k.s, k.n, "name") ? &name : mem_is(k.s, k.n, "input") ? &input
                         : mem_is(k.s, k.n, "content") ? &content : NULL;
        if (dst)
            *dst = v;
    }
    if (type.t != JT_STR)
        return fail(q, "%s.type: Field required", where);
    if (js_is(&type, "text")) {
        if (text.t != JT_STR)
            return fail(q, "%s.text: Field required", where);
        user_text(q, &text);
    } else if (js_is(&type, "tool_use")) {
        if (q->user_turn)
            return fail(q, "%s: tool_use blocks can only appear in assistant messages", where);
        if (id.t != JT_STR || name.t != JT_STR)
            return fail(q, "%s.%s: Field required", where, id.t != JT_STR ? "id" : "name");
        if (input.t != JT_OBJ)
            return fail(q, "%s.input: Input should be a valid dictionary", where);
        if (q->nuse < ANT_IDS_MAX)
            q->use_id[q->nuse++] = id;
    } else if (js_is(&type, "tool_result")) {
        if (!q->user_turn)
            return fail(q, "%s: tool_result blocks can only appear in user messages", where);
        if (id.t != JT_STR)
            return fail(q, "%s.tool_use_id: Field required", where);
        bool known = false;
        for (int i = 0; i < q->nuse && !known; i++)
            known = q->use_id[i].n == id.n && memcmp(q->use_id[i].s, id.s, id.n) == 0;
        if (!known)
            return fail(q, "messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %.*s. "
                        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
                        mi, bi, (int)(id.n > 64 ? 64 : id.n), id.s);
        if (content.t == JT_STR)
            q->words += js_words(content.s, content.n);
        else if (content.t != JT_ARR && content.t != JT_ERR)
            return fail(q, "%s.content: Input should be a valid list", where);
        if (q->nres < ANT_IDS_MAX) {
            q->res_id[q->nres] = id;
            q->res[q->nres++] = content;
        }
    }
    return 0;
}

/* messages[mi]: role first (members come in any order), then its content; 1 if it has content. */
static int message_parse(struct jscan *j, struct anthropic_req *q, int mi)
{
    struct jval role = { 0 }, content = { 0 }, k, v;
    if (js_peek(j) != '{')
        return fail(q, "messages.%d: Input should be a valid dictionary", mi);
    for (int r = js_open(j, '{'); r != 0; r = js_more(j, '}')) {
        if (r < 0 || !js_key(j, &k) || js_read(j, &v) == JT_ERR)
            return fail(q, "%s", BAD_JSON);
        if (mem_is(k.s, k.n, "role"))
            role = v;
        else if (mem_is(k.s, k.n, "content"))
            content = v;
        else
            return fail(q, "messages.%d.%.*s: Extra inputs are not permitted", mi, (int)(k.n > 64 ? 64 : k.n), k.s);
    }
    if (js_is(&role, "system"))
        return fail(q, "messages.%d.role: Unexpected role \"system\". The Messages API accepts a top-level "
                    "`system` parameter, not \"system\" as an input message role.", mi);
    if (!js_is(&role, "user") && !js_is(&role, "assistant"))
        return fail(q, "messages.%d.role: Input should be 'user' or 'assistant'", mi);
    if (content.t == JT_ERR)
        return fail(q, "messages.%d.content: Field required", mi);
    bool user = js_is(&role, "user");
    if (user && !q->user_turn) {   /* a new user turn */
        q->asks = false;
        q->nres = 0;
    }
    if (!user)
        q->nuse = 0;
    q->user_turn = user;
    if (content.t == JT_STR) {
        user_text(q, &content);
        return content.n > 0;
    }
    if (content.t != JT_ARR)
        return fail(q, "messages.%d.content: Input should be a valid list", mi);
    struct jscan cj = { .p = content.s, .end = content.s + content.n };
    int bi = 0;
    for (int r = js_open(&cj, '['); r != 0; r = js_more(&cj, ']'), bi++)
        if (r < 0 || block_parse(&cj, q, mi, bi) < 0)
            return fail(q, "%s", BAD_JSON);
    return bi > 0;
}

static int messages_parse(struct jscan *j, struct anthropic_req *q)
{
    int mi = 0, empty_at = -1;
    bool empty_assistant = false;
    if (js_peek(j) != '[')
        return fail(q, "messages: Input should be a valid list");
    for (int r = js_open(j, '['); r != 0; r = js_more(j, ']'), mi++) {
        int has = r < 0 ? fail(q, "%s", BAD_JSON) : message_parse(j, q, mi);
        if (has < 0)
            return -1;
        if (!has && empty_at < 0) {
            empty_at = mi;
            empty_assistant = !q->user_turn;
        }
    }
    if (mi == 0)
        return fail(q, "messages: at least one message is required");
    if (empty_at >= 0 && !(empty_at == mi - 1 && empty_assistant))
        return fail(q, "messages.%d: all messages must have non-empty content except for the optional final "
                    "assistant message", empty_at);
    q->has_messages = true;
    return 0;
}

static int tools_parse(struct jscan *j, struct anthropic_req *q)
{
    if (js_peek(j) != '[')
        return fail(q, "tools: Input should be a valid list");
    for (int r = js_open(j, '['); r != 0; r = js_more(j, ']'), q->ntools++) {
        struct jval name = { 0 }, type = { 0 }, schema = { 0 }, k, v;
        if (r < 0 || js_peek(j) != '{')
            return fail(q, "tools.%d: Input should be a valid dictionary", q->ntools);
        for (int m = js_open(j, '{'); m != 0; m = js_more(j, '}')) {
            if (m < 0 || !js_key(j, &k) || js_read(j, &v) == JT_ERR)
                return fail(q, "%s", BAD_JSON);
            if (mem_is(k.s, k.n, "name"))
                name = v;
            else if (mem_is(k.s, k.n, "type"))
                type = v;
            else if (mem_is(k.s, k.n, "input_schema"))
                schema = v;
            else if (!mem_is(k.s, k.n, "description") && !mem_is(k.s, k.n, "cache_control") && type.t == JT_ERR)
                return fail(q, "tools.%d.%.*s: Extra inputs are not permitted", q->ntools, (int)(k.n > 64 ? 64 : k.n), k.s);
        }
        if (name.t != JT_STR)
            return fail(q, "tools.%d.name: Field required", q->ntools);
        if ((type.t == JT_ERR || js_is(&type, "custom")) && schema.t != JT_OBJ)
            return fail(q, "tools.%d.input_schema: Field required", q->ntools);
        if (q->ntools == 0 && q->tool.t == JT_ERR)
            q->tool = name;
    }
    return 0;
}

static int tool_choice_parse(struct jscan *j, struct anthropic_req *q)
{
    struct jval type = { 0 }, name = { 0 }, k, v;
    if (js_peek(j) != '{')
        return fail(q, "tool_choice: Input should be a valid dictionary");
    for (int r = js_open(j, '{'); r != 0; r = js_more(j, '}')) {
        if (r < 0 || !js_key(j, &k) || js_read(j, &v) == JT_ERR)
            return fail(q, "%s", BAD_JSON);
        if (mem_is(k.s, k.n, "type"))
            type = v;
        else if (mem_is(k.s, k.n, "name"))
            name = v;
    }
    q->choice = js_is(&type, "none") ? -1 : js_is(&type, "any") || js_is(&type, "tool") ? 1 : 0;
    if (!q->choice && !js_is(&type, "auto"))
        return fail(q, "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'");
    if (js_is(&type, "tool") && name.t != JT_STR)
        return fail(q, "tool_choice.name: Field required");
    if (js_is(&type, "tool"))
        q->tool = name;
    return 0;
}

static int stops_parse(struct jscan *j, struct anthropic_req *q)
{
    int i = 0;
    if (js_peek(j) != '[')
        return fail(q, "stop_sequences: Input should be a valid list");
    for (int r = js_open(j, '['); r != 0; r = js_more(j, ']'), i++) {
        struct jval v;
        if (r < 0 || js_read(j, &v) != JT_STR)
            return fail(q, "stop_sequences.%d: Input should be a valid string", i);
        if (v.n > 0 && q->nstops < ANT_STOPS_MAX)
            q->stops[q->nstops++] = v;
    }
    return 0;
}

/* The other top-level members, and what each must be; any member not listed is refused. */
enum member_kind { MK_MODEL, MK_MAX_TOKENS, MK_UNIT, MK_TOP_K, MK_STREAM, MK_OBJECT, MK_ANY };
static const struct member {
    const char *name;
    enum member_kind kind;
} MEMBERS[] = {
    { "model", MK_MODEL },       { "max_tokens", MK_MAX_TOKENS }, { "temperature", MK_UNIT },
    { "top_p", MK_UNIT },        { "top_k", MK_TOP_K },           { "stream", MK_STREAM },
    { "metadata", MK_OBJECT },   { "thinking", MK_OBJECT },       { "service_tier", MK_ANY },
    { "context_management", MK_ANY },
};

static int member_check(struct anthropic_req *q, const struct jval *k, const struct jval *v)
{
    int kn = (int)(k->n > 64 ? 64 : k->n);
    const struct member *m = NULL;
    for (size_t i = 0; i < ARRAY_LEN(MEMBERS) && !m; i++)
        if (mem_is(k->s, k->n, MEMBERS[i].name))
            m = &MEMBERS[i];
    if (!m)
        return fail(q, "%.*s: Extra inputs are not permitted", kn, k->s);
    long l;
    double d;
    bool whole = v->t == JT_NUM && parse_long(v->s, v->n, &l) == 0;
    switch (m->kind) {
    case MK_MODEL:
        if (v->t != JT_STR)
            return fail(q, "model: Input should be a valid string");
        q->model = *v;
        break;
    case MK_MAX_TOKENS:
        if (!whole || l < 1)
            return fail(q, whole ? "max_tokens: Input should be greater than or equal to 1"
                                 : "max_tokens: Input should be a valid integer");
        q->max_tokens = l;
        q->has_max = true;
        break;
    case MK_UNIT:   /* R-ANT-3: the range a Claude model accepts; the gateway must not pass an OpenAI 1.5 */
        if (v->t != JT_NUM || parse_double(v->s, v->n, &d) < 0 || d < 0 || d > 1)
            return fail(q, "%.*s: Input should be a number between 0 and 1", kn, k->s);
        break;
    case MK_TOP_K:
        if (!whole || l < 0)
            return fail(q, "top_k: Input should be a valid integer");
        break;
    case MK_STREAM:
        if (v->t != JT_TRUE && v->t != JT_FALSE)
            return fail(q, "stream: Input should be a valid boolean");
        q->stream = v->t == JT_TRUE;
        break;
    case MK_OBJECT:
        if (v->t != JT_OBJ)
            return fail(q, "%.*s: Input should be a valid dictionary", kn, k->s);
        break;
    case MK_ANY:
        break;
    }
    return 0;
}

static int system_parse(struct jscan *j, struct anthropic_req *q)
{
    struct jval v;
    if (js_peek(j) != '"')
        return text_list(j, q, "system", true);
    if (js_read(j, &v) != JT_STR)
        return fail(q, "%s", BAD_JSON);
    q->words += js_words(v.s, v.n);
    return 0;
}

/* 0 if the body is a valid Messages request (or count_tokens body, q->count_only), else -1 and q->err. */
int anthropic_req_parse(struct anthropic_req *q, const char *body, size_t n)
{
    struct jscan j = { .p = body, .end = body + n };
    struct jval k, v;
    if (js_peek(&j) != '{')
        return fail(q, "%s", BAD_JSON);
    for (int r = js_open(&j, '{'); r != 0; r = js_more(&j, '}')) {
        if (r < 0 || !js_key(&j, &k))
            return fail(q, "%s", BAD_JSON);
        int rc = mem_is(k.s, k.n, "messages") ? messages_parse(&j, q)
               : mem_is(k.s, k.n, "system") ? system_parse(&j, q)
               : mem_is(k.s, k.n, "tools") ? tools_parse(&j, q)
               : mem_is(k.s, k.n, "tool_choice") ? tool_choice_parse(&j, q)
               : mem_is(k.s, k.n, "stop_sequences") ? stops_parse(&j, q)
               : js_read(&j, &v) == JT_ERR ? fail(q, "%s", BAD_JSON) : member_check(q, &k, &v);
        if (rc < 0)
            return -1;
    }
    if (js_peek(&j) != 0)
        return fail(q, "%s", BAD_JSON);
    if (q->model.t != JT_STR)
        return fail(q, "model: Field required");
    if (!q->has_max && !q->count_only)
        return fail(q, "max_tokens: Field required");
    return q->has_messages ? 0 : fail(q, "messages: Field required");
}

/* Appends the text of a tool_result's content (a string, or its text blocks), each part followed by a space. */
void anthropic_req_result(struct buf *o, const struct jval *res)
{
    if (res->t != JT_ARR) {
        if (res->t == JT_STR)
            buf_add(o, res->s, res->n);
        buf_add(o, " ", 1);
        return;
    }
    struct jscan j = { .p = res->s, .end = res->s + res->n };
    for (int r = js_open(&j, '['); r > 0; r = js_more(&j, ']'))
        for (int m = js_open(&j, '{'); m > 0; m = js_more(&j, '}')) {
            struct jval key, v;
            if (js_key(&j, &key) && js_read(&j, &v) == JT_STR && mem_is(key.s, key.n, "text")) {
                buf_add(o, v.s, v.n);
                buf_add(o, " ", 1);
            }
        }
}
