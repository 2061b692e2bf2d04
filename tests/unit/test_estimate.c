/* test_estimate.c: the calibrated prompt-token estimate (fcgi/estimate.h,
 * R-GUARD-2): each character class by hand, and the calibration texts against
 * their real cl100k_base counts within the error the README states. */
#include "check.h"

#include "estimate.h"
#include "estimate_fixtures.h"

#include <math.h>
#include <string.h>

static void test_classes(void)
{
    static const struct { const char *text; int64_t want; } cases[] = {
        {"", 0},
        {"hello", 1},                       /* a word */
        {"hello world", 2},                 /* one space is the next word's */
        {"internationalization", 3},        /* 20 letters: 8 + 14 eighths */
        {"12345678", 3},                    /* digits in threes */
        {"a, b.", 3},                       /* two words, two half-token punctuation marks */
        {"a\n\nb", 3},                      /* a line-break run is one */
        {"a    b", 3},                      /* an indentation run is one */
        {"中文字", 3},                      /* ideographs: one each */
        {"ひらがな", 4},                    /* kana */
        {"한국어", 3},                      /* hangul */
        {"café", 2},                        /* a letter outside ASCII: one */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_INT(estimate_text(cases[i].text, strlen(cases[i].text)), cases[i].want, cases[i].text);
    /* a cut sequence at the end is counted, never read past */
    CHECK_INT(estimate_text("\xe4\xb8", 2), 1, "truncated UTF-8");
}

static void test_request(void)
{
    static const struct { const char *body; int64_t want; } cases[] = {
        /* 4 per message + the text + 3 for the reply */
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"hello world\"}]}", 4 + 2 + 3},
        {"{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":"
         "[{\"type\":\"text\",\"text\":\"hello\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}",
         4 + 2 + 4 + 1 + 3},
        {"{\"prompt\":\"hello world\"}", 2},
        {"{\"input\":[\"hello\",\"world\"]}", 2},
        /* Anthropic: system beside the messages */
        {"{\"system\":\"be brief\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}", 2 + 4 + 1 + 3},
        {"[1]", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct json_object *o = json_tokener_parse(cases[i].body);
        CHECK_INT(estimate_request(o), cases[i].want, cases[i].body);
        json_object_put(o);
    }
}

/* The README's table: mean and largest relative error per class of text. */
static void test_calibration(void)
{
    static const struct { const char *cls; double mean_max, worst_max; } bounds[] = {
        {"english", 0.05, 0.06}, {"code", 0.06, 0.15}, {"chinese", 0.10, 0.15}, {"japanese", 0.05, 0.06},
    };
    size_t n = sizeof estimate_fixtures / sizeof estimate_fixtures[0];
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        double sum = 0, worst = 0, sum_o = 0, worst_o = 0, bias = 0;
        int count = 0;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(estimate_fixtures[i].cls, bounds[b].cls) != 0)
                continue;
            double real = estimate_fixtures[i].cl100k;
            double rel = fabs((double)estimate_text(estimate_fixtures[i].text, strlen(estimate_fixtures[i].text)) -
                              real) / real;
            double est = (double)estimate_text(estimate_fixtures[i].text, strlen(estimate_fixtures[i].text));
            double rel_o = fabs(est - estimate_fixtures[i].o200k) / estimate_fixtures[i].o200k;
            bias += (est - real) / real;
            sum += rel;
            worst = rel > worst ? rel : worst;
            sum_o += rel_o;
            worst_o = rel_o > worst_o ? rel_o : worst_o;
            count++;
        }
        CHECK(count > 0, "no %s texts", bounds[b].cls);
        if (!count)
            continue;
        printf("# %s: %d texts; cl100k_base: mean |error| %.1f %%, largest %.1f %%, mean bias %+.1f %%;"
               " o200k_base: mean |error| %.1f %%, largest %.1f %%\n", bounds[b].cls, count, 100 * sum / count,
               100 * worst, 100 * bias / count, 100 * sum_o / count, 100 * worst_o);
        CHECK(sum / count <= bounds[b].mean_max, "%s: mean error %.3f", bounds[b].cls, sum / count);
        CHECK(worst <= bounds[b].worst_max, "%s: largest error %.3f", bounds[b].cls, worst);
    }
}

int main(void)
{
    test_classes();
    test_request();
    test_calibration();
    return check_done();
}
