/* estimate.c: prompt tokens estimated by character classes (R-GUARD-2).
 *
 * BPE vocabularies of the cl100k / o200k / Llama-3 kind give a common English
 * word (with its leading space) one token, a long word one more per ~8
 * letters, a run of digits one per three, most ASCII punctuation about half a
 * token (pairs such as "->" or ");" merge), a line break or an indentation
 * run one, and a CJK ideograph, kana or hangul syllable about one. The
 * weights below were fitted to cl100k_base on English prose, C and Python
 * source, Chinese and Japanese text; the README gives the measured error. They
 * are kept in eighths so the sum is integer arithmetic. */
#include "estimate.h"

#include <string.h>

enum { W_WORD = 8, W_LONG_LETTER = 1, W_DIGITS3 = 8, W_PUNCT = 4, W_SPACE_RUN = 8, W_NEWLINE_RUN = 8,
       W_WIDE = 8, W_OTHER = 8 };
#define WORD_FREE_LETTERS 6         /* letters a word has before each one more costs W_LONG_LETTER */
#define MESSAGE_OVERHEAD 4          /* role and separators around each message */
#define REPLY_PRIMING 3             /* the assistant turn the template opens */

static int is_alpha(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The code point of the UTF-8 sequence at s (at most n bytes), its length in *len. */
static uint32_t decode(const unsigned char *s, size_t n, size_t *len)
{
    uint32_t c = s[0];
    size_t k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (k > n)
        k = n;
    uint32_t cp = k == 1 ? c : c & (0x3F >> (k - 1));
    for (size_t i = 1; i < k; i++)
        cp = cp << 6 | (s[i] & 0x3F);
    *len = k;
    return cp;
}

/* CJK ideographs, kana, hangul and their full-width punctuation: about one token each. */
static int is_wide(uint32_t cp)
{
    return (cp >= 0x3000 && cp <= 0x30FF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
           (cp >= 0xAC00 && cp <= 0xD7AF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFF00 && cp <= 0xFFEF);
}

int64_t estimate_text(const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    int64_t eighths = 0;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        if (is_alpha(s[i])) {
            while (j < n && is_alpha(s[j]))
                j++;
            eighths += W_WORD + (j - i > WORD_FREE_LETTERS ? (int64_t)(j - i - WORD_FREE_LETTERS) * W_LONG_LETTER : 0);
        } else if (is_digit(s[i])) {
            while (j < n && is_digit(s[j]))
                j++;
            eighths += (int64_t)((j - i + 2) / 3) * W_DIGITS3;
        } else if (is_space(s[i])) {
            int newline = 0;
            while (j < n && is_space(s[j]))
                newline |= s[j++] == '\n';
            /* one space before a word is part of the word's token */
            if (newline)
                eighths += W_NEWLINE_RUN;
            else if (j - i > 1)
                eighths += W_SPACE_RUN;
        } else if (s[i] < 0x80) {
            j = i + 1;
            eighths += W_PUNCT;
        } else {
            size_t len;
            uint32_t cp = decode(s + i, n - i, &len);
            j = i + len;
            eighths += is_wide(cp) ? W_WIDE : W_OTHER;
        }
        i = j;
    }
    return (eighths + 7) / 8;
}

static int64_t estimate_string(struct json_object *v)
{
    return json_object_is_type(v, json_type_string)
               ? estimate_text(json_object_get_string(v), (size_t)json_object_get_string_len(v))
               : 0;
}

/* A content value: a string, or an array of parts whose "text" (or, for
 * strings in a prompt/input array, the string itself) the model reads. */
static int64_t estimate_content(struct json_object *v)
{
    if (!v)
        return 0;
    if (json_object_is_type(v, json_type_string))
        return estimate_string(v);
    if (!json_object_is_type(v, json_type_array))
        return 0;
    int64_t t = 0;
    size_t n = json_object_array_length(v);
    for (size_t i = 0; i < n; i++) {
        struct json_object *part = json_object_array_get_idx(v, i), *text;
        if (json_object_is_type(part, json_type_string))
            t += estimate_string(part);
        else if (json_object_is_type(part, json_type_object)) {
            if (json_object_object_get_ex(part, "text", &text))
                t += estimate_string(text);
            if (json_object_object_get_ex(part, "content", &text))     /* Anthropic tool_result, Responses items */
                t += estimate_content(text);
        }
    }
    return t;
}

static struct json_object *field(struct json_object *o, const char *name)
{
    struct json_object *v = NULL;
    return json_object_object_get_ex(o, name, &v) ? v : NULL;
}

int64_t estimate_request(struct json_object *body)
{
    if (!body || !json_object_is_type(body, json_type_object))
        return 0;
    int64_t t = 0;
    struct json_object *msgs = field(body, "messages");
    if (msgs && json_object_is_type(msgs, json_type_array)) {
        size_t n = json_object_array_length(msgs);
        for (size_t i = 0; i < n; i++) {
            struct json_object *m = json_object_array_get_idx(msgs, i);
            t += MESSAGE_OVERHEAD + estimate_content(field(m, "content")) + estimate_string(field(m, "name"));
            struct json_object *calls = field(m, "tool_calls");
            if (calls) {
                const char *js = json_object_to_json_string_ext(calls, JSON_C_TO_STRING_PLAIN);
                t += estimate_text(js, strlen(js));
            }
        }
        t += REPLY_PRIMING;
    }
    t += estimate_content(field(body, "system")) + estimate_content(field(body, "instructions")) +
         estimate_content(field(body, "prompt")) + estimate_content(field(body, "input"));
    /* tool schemas reach the model as text the template renders: count their JSON */
    struct json_object *tools = field(body, "tools");
    if (tools) {
        const char *js = json_object_to_json_string_ext(tools, JSON_C_TO_STRING_PLAIN);
        t += estimate_text(js, strlen(js));
    }
    return t;
}
