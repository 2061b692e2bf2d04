/* traceparent.c: W3C Trace Context (traceparent.h). */
#include "traceparent.h"

#include <stdio.h>

int traceparent_parse(const char *value, char trace_id[33], char span_id[17], int *flags)
{
    (void)value; (void)trace_id; (void)span_id; (void)flags;
    return -1;
}

void traceparent_format(char out[56], const char *trace_id, const char *span_id, int flags)
{
    snprintf(out, 56, "00-%s-%s-%02x", trace_id, span_id, flags & 0xff);
}
