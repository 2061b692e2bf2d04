/* traceparent.h: W3C Trace Context headers, pure (R-OBS-3). */
#ifndef SLUICE_TRACEPARENT_H
#define SLUICE_TRACEPARENT_H

/* Parses a traceparent value (version 00, or a later version read as 00
 * allows); 0 and the fields, or -1 when it must be ignored (then a fresh
 * trace starts). trace_id holds 33, span_id 17 bytes. */
int traceparent_parse(const char *value, char trace_id[33], char span_id[17], int *flags);
/* "00-<trace_id>-<span_id>-<flags>" into out (56 bytes). */
void traceparent_format(char out[56], const char *trace_id, const char *span_id, int flags);

#endif
