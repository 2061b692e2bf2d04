/* test_semantic.c: the semantic cache's vector arithmetic (R-CACHE-4). */
#include "check.h"

#include "semantic.h"

#include <math.h>

static void test_normalize(void)
{
    float v[2] = {3, 4};
    CHECK(semantic_normalize(v, 2), "3,4 normalises");
    CHECK(fabsf(v[0] - 0.6f) < 1e-6f && fabsf(v[1] - 0.8f) < 1e-6f, "to 0.6,0.8");
    float z[3] = {0, 0, 0};
    CHECK(!semantic_normalize(z, 3), "zero vector refused");
    float bad[2] = {1, NAN};
    CHECK(!semantic_normalize(bad, 2), "NaN refused");
    CHECK(bad[0] == 1, "refused vector untouched");
}

static void test_cosine(void)
{
    float a[2] = {1, 0}, b[2] = {0, 1}, c[2] = {0.6f, 0.8f};
    CHECK(fabs(semantic_cosine(a, a, 2) - 1) < 1e-9, "same = 1");
    CHECK(fabs(semantic_cosine(a, b, 2)) < 1e-9, "orthogonal = 0");
    CHECK(fabs(semantic_cosine(a, c, 2) - 0.6) < 1e-6, "a.c = 0.6");
    float n[2] = {-1, 0};
    CHECK(fabs(semantic_cosine(a, n, 2) + 1) < 1e-9, "opposite = -1");
}

static void test_best(void)
{
    float q[2] = {1, 0}, e1[2] = {0.6f, 0.8f}, e2[2] = {0.96f, 0.28f}, e3[3] = {1, 0, 0};
    struct semantic_cand c[] = {{e1, 2}, {e3, 3}, {e2, 2}};
    double s = 0;
    CHECK_INT(semantic_best(q, 2, c, 3, 0.95, &s), 2, "e2 best above 0.95");
    CHECK(fabs(s - 0.96) < 1e-6, "its similarity");
    CHECK_INT(semantic_best(q, 2, c, 3, 0.97, &s), -1, "below threshold: miss");
    CHECK(fabs(s - 0.96) < 1e-6, "best still reported on a miss");
    /* dims mismatch: the 3-dim entry equal to q is never compared */
    struct semantic_cand only3[] = {{e3, 3}};
    CHECK_INT(semantic_best(q, 2, only3, 1, 0.5, &s), -1, "dims mismatch skipped");
    CHECK_INT(semantic_best(q, 2, NULL, 0, 0.5, &s), -1, "no candidates");
    struct semantic_cand tie[] = {{e2, 2}, {e2, 2}};
    CHECK_INT(semantic_best(q, 2, tie, 2, 0.5, &s), 0, "tie: the earliest");
}

int main(void)
{
    test_normalize();
    test_cosine();
    test_best();
    return check_done();
}
