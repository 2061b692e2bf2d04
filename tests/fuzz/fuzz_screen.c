/* fuzz_screen.c: the texts output content rules read (fcgi/screen_text.c) from
 * upstream answers and stream events, and a stream's window start.
 *
 * Invariants: the answer's text (strings joined without a separator) is never longer
 * than the input it came from (JSON escapes only shrink); with a separator it grows by
 * at most one byte a string; the window start is within the text, keeps at most the
 * bytes asked for (0 when the text is shorter) and, on valid UTF-8 without a word
 * break, never falls inside a character. */
#include "fuzz.h"

#include "screen_text.h"

static int utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
        i += k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    const char *s = (const char *)data;
    struct json_object *o = fuzz_json(s, size, 0);
    if (o) {
        struct buf plain, lines;
        buf_init(&plain, 0);
        buf_init(&lines, 0);
        screen_text_answer(o, 0, "", &plain);
        screen_text_answer(o, 0, "\n", &lines);
        FUZZ_CHECK(plain.len <= size, "text of %zu bytes from %zu", plain.len, size);
        FUZZ_CHECK(lines.len >= plain.len && lines.len <= plain.len + size, "%zu bytes with separators, %zu without",
                   lines.len, plain.len);
        buf_free(&plain);
        buf_free(&lines);
        json_object_put(o);
    }
    for (size_t keep = 1; keep <= 4096; keep *= 8) {
        size_t at = screen_text_tail(s, size, keep);
        FUZZ_CHECK(at <= size, "start %zu past %zu", at, size);
        if (size <= keep)
            FUZZ_CHECK(at == 0, "a short text cut at %zu", at);
        else
            FUZZ_CHECK(size - at <= keep, "kept %zu of at most %zu", size - at, keep);
        if (at && at < size && !memchr(s + size - keep, ' ', keep) && !memchr(s + size - keep, '\n', keep) &&
            !memchr(s + size - keep, '\t', keep) && utf8_valid(data, size))
            FUZZ_CHECK((data[at] & 0xC0) != 0x80, "start %zu inside a character", at);
    }
    return 0;
}
