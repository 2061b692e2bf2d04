/* fcgiwire.h: FastCGI 1.0 records and name-value pairs, as bytes (no sockets).
 * The facts are the FastCGI specification's; fcgiconn.c moves them over a socket. */
#ifndef SLUICE_FCGIWIRE_H
#define SLUICE_FCGIWIRE_H

#include <stddef.h>
#include <stdint.h>

enum {
    FCGI_HEADER_LEN = 8,
    FCGI_MAX_CONTENT = 65535,
    FCGI_VERSION_1 = 1,
    FCGI_NULL_REQUEST_ID = 0,
    FCGI_LISTENSOCK_FILENO = 0,     /* the listening socket a FastCGI program is started with */
};

enum fcgi_type {
    FCGI_BEGIN_REQUEST = 1,
    FCGI_ABORT_REQUEST = 2,
    FCGI_END_REQUEST = 3,
    FCGI_PARAMS = 4,
    FCGI_STDIN = 5,
    FCGI_STDOUT = 6,
    FCGI_STDERR = 7,
    FCGI_DATA = 8,
    FCGI_GET_VALUES = 9,
    FCGI_GET_VALUES_RESULT = 10,
    FCGI_UNKNOWN_TYPE = 11,
};

enum { FCGI_RESPONDER = 1, FCGI_KEEP_CONN = 1 };

enum fcgi_protocol_status {
    FCGI_REQUEST_COMPLETE = 0,
    FCGI_CANT_MPX_CONN = 1,
    FCGI_OVERLOADED = 2,
    FCGI_UNKNOWN_ROLE = 3,
};

struct fcgi_header {
    int version, type;
    unsigned id;
    size_t content, padding;
};

/* Reads the 8 bytes at p. */
void fcgi_header_parse(const unsigned char *p, struct fcgi_header *h);
/* Writes a record header for content bytes (<= FCGI_MAX_CONTENT), no padding. */
void fcgi_header_put(unsigned char *p, int type, unsigned id, size_t content);
/* The 8-byte body of an END_REQUEST record. */
void fcgi_end_body_put(unsigned char *p, uint32_t app_status, int protocol_status);

/* One name-value pair at p (n bytes available): its name and value lengths and
 * where each starts. 1 decoded, 0 more bytes are needed, -1 malformed (a
 * length over 2^31 - 1). */
int fcgi_pair_parse(const unsigned char *p, size_t n, size_t *name_off, size_t *name_len, size_t *value_off,
                    size_t *value_len);
/* Encodes a pair into out (room bytes); its length, or 0 when it does not fit. */
size_t fcgi_pair_put(unsigned char *out, size_t room, const char *name, size_t name_len, const char *value,
                     size_t value_len);

#endif
