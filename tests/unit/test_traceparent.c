/* test_traceparent.c: W3C trace context parsing and formatting (fcgi/traceparent.c). */
#include "check.h"
#include "traceparent.h"

int main(void)
{
    char out[56];
    traceparent_format(out, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 1);
    const char *got = out;
    CHECK_STR(got, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "format");
    return check_done();
}
