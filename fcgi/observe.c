/* observe.c: the end of every data-plane request, for the operator (observe.h). */
#include "observe.h"

#include "access_log.h"
#include "metrics_record.h"
#include "spans.h"
#include "util.h"

void observe_begin(struct request *r)
{
    spans_begin(r);
}

void observe_end(struct request *r)
{
    metrics_record(r);
    access_log_write(r);
    spans_end(r);
}
