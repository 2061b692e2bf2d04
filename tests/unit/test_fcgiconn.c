/* test_fcgiconn.c: FastCGI records and the connection layer (fcgi/fcgiwire.h,
 * fcgi/fcgiconn.h) against a hand-written front server on a Unix socket pair:
 * params split anywhere, padding, management records, roles, multiplexing
 * refused, keep-alive, abort, and what stdout looks like on the wire. */
#include "check.h"

#include "fcgiconn.h"
#include "fcgiwire.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int listen_fd;
static struct sockaddr_un addr;
static socklen_t addr_len;

static void listen_abstract(void)
{
    listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    int n = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "sluice-test-fcgiconn-%d", (int)getpid());
    addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (bind(listen_fd, (struct sockaddr *)&addr, addr_len) != 0 || listen(listen_fd, 16) != 0) {
        perror("listen");
        exit(2);
    }
}

static int front_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&addr, addr_len) != 0) {
        perror("connect");
        exit(2);
    }
    return fd;
}

static void put_all(int fd, const void *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k <= 0) {
            perror("write");
            exit(2);
        }
        p = (const char *)p + k;
        n -= (size_t)k;
    }
}

static void rec(int fd, int type, unsigned id, const void *content, size_t len, size_t pad)
{
    unsigned char h[8];
    fcgi_header_put(h, type, id, len);
    h[6] = (unsigned char)pad;
    put_all(fd, h, 8);
    if (len)
        put_all(fd, content, len);
    static const unsigned char zeros[255];
    if (pad)
        put_all(fd, zeros, pad);
}

static void begin(int fd, unsigned id, int role, int keep)
{
    unsigned char b[8] = {(unsigned char)(role >> 8), (unsigned char)role, (unsigned char)(keep ? FCGI_KEEP_CONN : 0)};
    rec(fd, FCGI_BEGIN_REQUEST, id, b, 8, 0);
}

/* Reads one record from the front side: its type, id and content. -1 at EOF. */
static int read_full(int fd, void *p, size_t n)
{
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k <= 0)
            return -1;
        p = (char *)p + k;
        n -= (size_t)k;
    }
    return 0;
}

static int front_record(int fd, struct fcgi_header *h, unsigned char *content)
{
    unsigned char hb[8], pad[255];
    if (read_full(fd, hb, 8) != 0)
        return -1;
    fcgi_header_parse(hb, h);
    CHECK_INT(h->version, FCGI_VERSION_1, "every record says FastCGI 1");
    if (read_full(fd, content, h->content) != 0 || read_full(fd, pad, h->padding) != 0)
        return -1;
    return 0;
}

static void test_pairs(void)
{
    unsigned char b[600];
    char big[300];
    memset(big, 'v', sizeof big);
    size_t n = fcgi_pair_put(b, sizeof b, "NAME", 4, big, sizeof big);
    CHECK_INT(n, 1 + 4 + 4 + 300, "a long value takes a four-byte length");
    size_t no, nl, vo, vl;
    CHECK_INT(fcgi_pair_parse(b, n, &no, &nl, &vo, &vl), 1, "decodes");
    CHECK(nl == 4 && vl == 300 && memcmp(b + no, "NAME", 4) == 0 && b[vo] == 'v', "name %zu value %zu", nl, vl);
    for (size_t cut = 0; cut < n; cut++)
        if (fcgi_pair_parse(b, cut, &no, &nl, &vo, &vl) != 0) {
            CHECK(0, "a pair cut at %zu bytes must ask for more", cut);
            break;
        }
    CHECK_INT(fcgi_pair_put(b, 10, "NAME", 4, big, sizeof big), 0, "no room: nothing written");
    unsigned char hb[8];
    struct fcgi_header h;
    fcgi_header_put(hb, FCGI_STDOUT, 0x1234, 0xfedc);
    fcgi_header_parse(hb, &h);
    CHECK(h.version == 1 && h.type == FCGI_STDOUT && h.id == 0x1234 && h.content == 0xfedc && h.padding == 0,
          "header round trip");
}

/* Params cut in the middle of a pair and of a length, padded records, stdin
 * in two records; then stdout and the end as the front server sees them. */
static void test_request(void)
{
    int f = front_connect();
    unsigned char p[1024];
    size_t n = 0;
    char longv[200];
    memset(longv, 'x', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    n += fcgi_pair_put(p + n, sizeof p - n, "REQUEST_METHOD", 14, "POST", 4);
    n += fcgi_pair_put(p + n, sizeof p - n, "HTTP_X_LONG", 11, longv, strlen(longv));
    n += fcgi_pair_put(p + n, sizeof p - n, "CONTENT_LENGTH", 14, "11", 2);
    n += fcgi_pair_put(p + n, sizeof p - n, "EMPTY", 5, "", 0);
    begin(f, 7, FCGI_RESPONDER, 0);
    rec(f, FCGI_PARAMS, 7, p, 3, 5);             /* inside the first pair */
    rec(f, FCGI_PARAMS, 7, p + 3, 20, 0);
    rec(f, FCGI_PARAMS, 7, p + 23, n - 23, 7);
    rec(f, FCGI_PARAMS, 7, NULL, 0, 0);
    rec(f, FCGI_STDIN, 7, "hello ", 6, 2);
    rec(f, FCGI_STDIN, 7, "world", 5, 3);
    rec(f, FCGI_STDIN, 7, NULL, 0, 0);

    struct fcgi_conn c;
    fcgi_conn_init(&c);
    CHECK_INT(fcgi_accept(&c, listen_fd), 0, "accepted");
    CHECK_INT(c.id, 7, "request id");
    CHECK_STR(fcgi_param(&c, "REQUEST_METHOD"), "POST", "param");
    CHECK_STR(fcgi_param(&c, "HTTP_X_LONG"), longv, "long param");
    CHECK_STR(fcgi_param(&c, "EMPTY"), "", "empty param");
    CHECK(fcgi_param(&c, "REQUEST") == NULL, "a prefix is not a name");
    CHECK(fcgi_param(&c, "CONTENT_LENGTHX") == NULL, "nor a longer name");
    int seen = 0;
    for (char **e = c.envp; *e; e++)
        seen++;
    CHECK_INT(seen, 4, "envp entries");
    char body[64];
    size_t got = 0;
    long k;
    while ((k = fcgi_read(&c, body + got, 3)) > 0)
        got += (size_t)k;
    body[got] = 0;
    CHECK_INT(k, 0, "stdin ends");
    CHECK(strcmp(body, "hello world") == 0, "body: got \"%s\"", body);
    CHECK(c.stdin_done, "stdin done");
    CHECK_INT(fcgi_gone(&c), 0, "the front server is still there");

    char large[20000];
    memset(large, 'L', sizeof large);
    CHECK_INT(fcgi_write(&c, "Status: 200\r\n\r\n", 15), 0, "head");
    CHECK_INT(fcgi_write(&c, "abc", 3), 0, "small");
    CHECK_INT(fcgi_write(&c, large, sizeof large), 0, "large");
    CHECK_INT(fcgi_write(&c, "", 0), 0, "nothing");
    CHECK_INT(fcgi_flush(&c), 0, "flush");
    CHECK_INT(fcgi_write(&c, "z", 1), 0, "after a flush");
    fcgi_finish(&c);
    CHECK_INT(c.fd, -1, "closed: the front server did not ask to keep it");

    static unsigned char content[70000];
    static char all[40000];
    size_t alen = 0;
    struct fcgi_header h;
    int stdout_records = 0, empty_before_end = 0, ended = 0;
    while (front_record(f, &h, content) == 0) {
        CHECK_INT(h.id, 7, "every record carries the request id");
        if (h.type == FCGI_STDOUT) {
            if (h.content == 0) {
                empty_before_end = 1;
                continue;
            }
            if (empty_before_end)
                CHECK(0, "stdout after its end");
            memcpy(all + alen, content, h.content);
            alen += h.content;
            stdout_records++;
        } else if (h.type == FCGI_END_REQUEST) {
            CHECK(h.content == 8 && content[4] == FCGI_REQUEST_COMPLETE && content[3] == 0, "END_REQUEST complete");
            CHECK(empty_before_end, "the empty STDOUT comes before END_REQUEST");
            ended = 1;
        }
    }
    CHECK(ended, "the request ended");
    CHECK_INT(alen, 15 + 3 + sizeof large + 1, "stdout bytes");
    CHECK(memcmp(all, "Status: 200\r\n\r\nabc", 18) == 0 && all[18] == 'L' && all[alen - 2] == 'L' &&
              all[alen - 1] == 'z', "stdout in order");
    CHECK(stdout_records <= 4, "few records (%d)", stdout_records);
    fcgi_conn_free(&c);
    close(f);
}

/* GET_VALUES is answered, an unknown management record is named, another
 * role is refused and a second request on one connection is refused; then
 * the kept connection serves a second request. */
static void test_management_and_keep(void)
{
    int f = front_connect();
    unsigned char q[128];
    size_t n = fcgi_pair_put(q, sizeof q, "FCGI_MPXS_CONNS", 15, "", 0);
    n += fcgi_pair_put(q + n, sizeof q - n, "FCGI_UNHEARD_OF", 15, "", 0);
    rec(f, FCGI_GET_VALUES, 0, q, n, 0);
    rec(f, 99, 0, "??", 2, 0);
    begin(f, 3, 2 /* FCGI_AUTHORIZER */, 1);
    begin(f, 4, FCGI_RESPONDER, 1);
    rec(f, FCGI_PARAMS, 4, NULL, 0, 0);
    begin(f, 5, FCGI_RESPONDER, 0);              /* while 4 runs */
    rec(f, FCGI_STDIN, 4, NULL, 0, 0);

    struct fcgi_conn c;
    fcgi_conn_init(&c);
    CHECK_INT(fcgi_accept(&c, listen_fd), 0, "accepted");
    CHECK_INT(c.id, 4, "the responder request");
    CHECK(c.keep, "keep asked");
    CHECK(c.nparams == 0 && fcgi_param(&c, "X") == NULL, "no params");
    char b[4];
    CHECK_INT(fcgi_read(&c, b, sizeof b), 0, "empty body (the BEGIN of 5 is read on the way)");
    fcgi_write(&c, "one", 3);
    fcgi_finish(&c);
    CHECK(c.fd >= 0, "kept open");

    static unsigned char content[70000];
    struct fcgi_header h;
    int got_values = 0, got_unknown = 0, role_refused = 0, mpx_refused = 0, end4 = 0;
    while (!end4 && front_record(f, &h, content) == 0) {
        if (h.type == FCGI_GET_VALUES_RESULT) {
            size_t no, nl, vo, vl;
            got_values = fcgi_pair_parse(content, h.content, &no, &nl, &vo, &vl) == 1 && nl == 15 &&
                         memcmp(content + no, "FCGI_MPXS_CONNS", 15) == 0 && vl == 1 && content[vo] == '0' &&
                         vo + vl == h.content;   /* the unknown name is left out */
        } else if (h.type == FCGI_UNKNOWN_TYPE) {
            got_unknown = h.content == 8 && content[0] == 99;
        } else if (h.type == FCGI_END_REQUEST && h.id == 3) {
            role_refused = content[4] == FCGI_UNKNOWN_ROLE;
        } else if (h.type == FCGI_END_REQUEST && h.id == 5) {
            mpx_refused = content[4] == FCGI_CANT_MPX_CONN;
        } else if (h.type == FCGI_END_REQUEST && h.id == 4) {
            end4 = 1;
        }
    }
    CHECK(got_values, "GET_VALUES_RESULT says FCGI_MPXS_CONNS 0 and only what is known");
    CHECK(got_unknown, "FCGI_UNKNOWN_TYPE names type 99");
    CHECK(role_refused, "another role: FCGI_UNKNOWN_ROLE");
    CHECK(mpx_refused, "a second request on the connection: FCGI_CANT_MPX_CONN");
    CHECK(end4, "request 4 ended");

    /* the next request on the kept connection */
    unsigned char p[64];
    n = fcgi_pair_put(p, sizeof p, "SECOND", 6, "yes", 3);
    begin(f, 9, FCGI_RESPONDER, 0);
    rec(f, FCGI_PARAMS, 9, p, n, 0);
    rec(f, FCGI_PARAMS, 9, NULL, 0, 0);
    rec(f, FCGI_STDIN, 9, NULL, 0, 0);
    CHECK_INT(fcgi_accept(&c, listen_fd), 0, "second request on the kept connection");
    CHECK_INT(c.id, 9, "its id");
    CHECK_STR(fcgi_param(&c, "SECOND"), "yes", "its params, not the first one's");
    fcgi_finish(&c);
    CHECK_INT(c.fd, -1, "closed: not kept this time");
    fcgi_conn_free(&c);
    close(f);
}

/* ABORT_REQUEST and a closed connection both mean the client left. */
static void test_gone(void)
{
    for (int how = 0; how < 2; how++) {
        int f = front_connect();
        begin(f, 1, FCGI_RESPONDER, 0);
        rec(f, FCGI_PARAMS, 1, NULL, 0, 0);
        rec(f, FCGI_STDIN, 1, NULL, 0, 0);
        struct fcgi_conn c;
        fcgi_conn_init(&c);
        CHECK_INT(fcgi_accept(&c, listen_fd), 0, "accepted");
        char b;
        CHECK_INT(fcgi_read(&c, &b, 1), 0, "empty body");
        CHECK_INT(fcgi_gone(&c), 0, "still there");
        if (how == 0)
            rec(f, FCGI_ABORT_REQUEST, 1, NULL, 0, 0);
        else
            close(f);
        struct pollfd pf = {.fd = c.fd, .events = POLLIN};
        poll(&pf, 1, 2000);
        CHECK_INT(fcgi_gone(&c), 1, how == 0 ? "aborted" : "closed");
        CHECK_INT(fcgi_gone(&c), 1, "and stays so");
        fcgi_finish(&c);
        fcgi_conn_free(&c);
        if (how == 0)
            close(f);
    }
}

/* A broken connection is dropped and the next one served; a body larger
 * than the read buffer arrives whole. */
struct feeder {
    int fd;
    size_t len;
};

static void *feed(void *arg)
{
    struct feeder *fd = arg;
    static char chunk[FCGI_MAX_CONTENT];
    size_t left = fd->len, at = 0;
    while (left > 0) {
        size_t k = left > sizeof chunk ? sizeof chunk : left;
        for (size_t i = 0; i < k; i++)
            chunk[i] = (char)('a' + (at + i) % 26);
        rec(fd->fd, FCGI_STDIN, 2, chunk, k, (k & 7) ? 8 - (k & 7) : 0);
        at += k;
        left -= k;
    }
    rec(fd->fd, FCGI_STDIN, 2, NULL, 0, 0);
    return NULL;
}

static void test_broken_then_large(void)
{
    int bad = front_connect();
    unsigned char junk[8] = {2, FCGI_BEGIN_REQUEST, 0, 1, 0, 8, 0, 0};   /* version 2 */
    put_all(bad, junk, sizeof junk);
    int f = front_connect();
    begin(f, 2, FCGI_RESPONDER, 0);
    rec(f, FCGI_PARAMS, 2, NULL, 0, 0);
    struct feeder fd = {.fd = f, .len = 200001};
    pthread_t t;
    pthread_create(&t, NULL, feed, &fd);
    struct fcgi_conn c;
    fcgi_conn_init(&c);
    CHECK_INT(fcgi_accept(&c, listen_fd), 0, "the good connection");
    CHECK_INT(c.id, 2, "its request");
    char x;
    CHECK(read(bad, &x, 1) == 0, "the broken one was closed");
    static char body[250000];
    size_t got = 0;
    long k;
    while ((k = fcgi_read(&c, body + got, sizeof body - got)) > 0)
        got += (size_t)k;
    CHECK_INT(got, 200001, "the whole body");
    int same = 1;
    for (size_t i = 0; i < got; i++)
        if (body[i] != (char)('a' + i % 26)) {
            same = 0;
            break;
        }
    CHECK(same, "byte for byte");
    pthread_join(t, NULL);
    fcgi_finish(&c);
    fcgi_conn_free(&c);
    close(f);
    close(bad);
}

int main(void)
{
    listen_abstract();
    test_pairs();
    test_request();
    test_management_and_keep();
    test_gone();
    test_broken_then_large();
    close(listen_fd);
    return check_done();
}
