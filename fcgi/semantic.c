/* semantic.c: vector arithmetic of the semantic cache; see semantic.h. */
#include "semantic.h"

#include <math.h>

_Bool semantic_normalize(float *v, size_t dims)
{
    double n = 0;
    for (size_t i = 0; i < dims; i++) {
        if (!isfinite(v[i]))
            return 0;
        n += (double)v[i] * v[i];
    }
    if (dims == 0 || n <= 0)
        return 0;
    n = sqrt(n);
    for (size_t i = 0; i < dims; i++)
        v[i] = (float)(v[i] / n);
    return 1;
}

double semantic_cosine(const float *a, const float *b, size_t dims)
{
    double d = 0;
    for (size_t i = 0; i < dims; i++)
        d += (double)a[i] * b[i];
    /* float rounding can put two equal unit vectors a hair above 1 */
    return d > 1 ? 1 : d < -1 ? -1 : d;
}

long semantic_best(const float *q, size_t dims, const struct semantic_cand *c, size_t n,
                   double threshold, double *best)
{
    long at = -1;
    double top = -2;
    for (size_t i = 0; i < n; i++) {
        if (c[i].dims != dims || !c[i].vec)
            continue;
        double s = semantic_cosine(q, c[i].vec, dims);
        if (s > top) {
            top = s;
            at = (long)i;
        }
    }
    if (best)
        *best = at >= 0 ? top : 0;
    return at >= 0 && top >= threshold ? at : -1;
}
