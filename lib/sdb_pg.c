/* sdb_pg.c: the PostgreSQL engine (database = "postgresql://…"), for a system of
 * record shared by several gateway hosts.
 *
 * Statements are rewritten once at prepare (sdb_pg_sql.c) and run with their
 * parameters bound, never spliced into the text: integers as int8, reals as
 * float8, blobs as binary bytea, text untyped so the server takes the column's
 * type. Results come back whole as text and are read like SQLite's columns.
 *
 * Two of SQLite's behaviours the code relies on are kept:
 *   - BEGIN IMMEDIATE lets one writer in at a time: here a transaction-scoped
 *     advisory lock, the same one on every host;
 *   - a failed statement inside a transaction leaves the transaction usable
 *     (the caller decides to go on or roll back): here each such statement runs
 *     under a savepoint. */
#include "sdb.h"

#ifdef SLUICE_LIBPQ

#include "arena.h"
#include "log.h"
#include "sdb_pg_sql.h"
#include "util.h"

#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The writers' lock (BEGIN IMMEDIATE): any constant that is sluice's alone. */
#define PG_WRITER_LOCK 0x736c75696365LL        /* "sluice" */

enum { OID_BOOL = 16, OID_BYTEA = 17, OID_TEXT = 25, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_OID = 26,
       OID_FLOAT4 = 700, OID_FLOAT8 = 701, OID_NUMERIC = 1700 };

struct pg {
    struct sdb base;
    PGconn *c;
    char err[512];
    int code;                 /* the last statement's SDB_ code, extended */
    int64_t changes;
    int lock_ms;
    uint64_t generation;      /* the session: a reset makes a new one (prepared statements gone) */
    uint64_t names;           /* prepared statements named so far */
    int listening;            /* LISTEN sent in this session */
    int in_tx;                /* between a BEGIN and its COMMIT / ROLLBACK */
    int64_t reset_after_ms;   /* no reconnect before (mono) */
};

struct param {
    unsigned type;            /* Oid; 0: the server infers it */
    int fmt;                  /* 1: binary (bytea) */
    int len;
    const char *val;          /* NULL: SQL NULL */
    char *owned;              /* a TRANSIENT copy, or the number's text */
};

struct pg_stmt {
    struct sdb_stmt base;
    char *sql;                /* rewritten */
    struct pg_sql_mark *marks;/* its parameters' places */
    int nmarks;
    enum pg_sql_kind kind;
    int nparams;
    struct param *p;
    PGresult *res;            /* after the first step, until reset */
    int row, nrows, ran;
    char *typed;              /* per parameter: sent with its bound type (param_types) */
    int int_untyped;          /* integers sent untyped (param_types) */
    int persistent;
    int unpreparable;         /* the server cannot prepare it without values */
    uint64_t prepared;        /* the session (pg.generation) it is prepared in; 0: not */
    char name[32];
    unsigned char **blob;     /* bytea columns of the current row, decoded */
    size_t *blob_len;
    int nblob;
};

static struct pg *P(struct sdb *db) { return (struct pg *)db; }
static struct pg_stmt *PS(struct sdb_stmt *st) { return (struct pg_stmt *)st; }

static int pg_claims(const char *where) { return sdb_is_url(where); }

static void pg_quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;                /* NOTICEs (IF NOT EXISTS ...) are not errors */
}

/* The text of an error without libpq's trailing newline. */
static void set_error(struct pg *db, int code, const char *msg)
{
    db->code = code;
    snprintf(db->err, sizeof db->err, "%s", msg ? msg : "unknown error");
    size_t n = strlen(db->err);
    while (n && (db->err[n - 1] == '\n' || db->err[n - 1] == ' '))
        db->err[--n] = 0;
}

/* SQLSTATE to the interface's codes. */
static int code_of(const char *state)
{
    if (!state)
        return SDB_ERROR;
    if (strcmp(state, "23505") == 0)
        return SDB_CONSTRAINT_UNIQUE;
    if (strcmp(state, "23514") == 0)
        return SDB_CONSTRAINT_CHECK;
    if (strncmp(state, "23", 2) == 0)
        return SDB_CONSTRAINT;
    if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 || strcmp(state, "55P03") == 0 ||
        strcmp(state, "57014") == 0)
        return SDB_BUSY;
    if (strcmp(state, "54000") == 0)
        return SDB_TOOBIG;
    if (strcmp(state, "22P02") == 0 || strcmp(state, "42804") == 0 || strcmp(state, "22003") == 0)
        return SDB_MISMATCH;
    return SDB_ERROR;
}

/* Runs a command without parameters; 0 or -1 with the error kept. */
static int simple(struct pg *db, const char *sql)
{
    PGresult *r = PQexec(db->c, sql);
    ExecStatusType s = PQresultStatus(r);
    int ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
    if (!ok)
        set_error(db, r ? code_of(PQresultErrorField(r, PG_DIAG_SQLSTATE)) : SDB_ERROR,
                  r && *PQresultErrorMessage(r) ? PQresultErrorMessage(r) : PQerrorMessage(db->c));
    PQclear(r);
    return ok ? 0 : -1;
}

/* What a session needs, at open and again after every reconnect: quiet NOTICEs, the
 * process's time zone (date(..., 'localtime') is the process's local day, as with
 * SQLite), and the lock wait sdb_busy_timeout set. */
static int session_setup(struct pg *db)
{
    const char *tz = getenv("TZ");
    char set_tz[160] = "", set_lock[64] = "";
    if (tz && *tz && *tz != ':' && strlen(tz) < 100 && !strpbrk(tz, "'\\"))
        snprintf(set_tz, sizeof set_tz, "; SET TimeZone = '%s'", tz);
    if (db->lock_ms > 0)
        snprintf(set_lock, sizeof set_lock, "; SET lock_timeout = %d", db->lock_ms);
    char setup[300];
    snprintf(setup, sizeof setup, "SET client_min_messages = warning%s%s", set_tz, set_lock);
    return simple(db, setup);
}

/* A connection the server dropped (a restart, a killed backend). Outside a
 * transaction it is opened again, at most once a second; inside one nothing can be
 * saved: every statement fails until the caller's ROLLBACK, and a COMMIT fails, so
 * no half of a transaction is ever written without the rest. 0 usable, -1 not. */
static int ensure_connected(struct pg *db)
{
    if (PQstatus(db->c) == CONNECTION_OK)
        return 0;
    if (db->in_tx) {
        set_error(db, SDB_ERROR, "the connection to the database was lost inside a transaction");
        return -1;
    }
    int64_t now = mono_ms();
    if (now < db->reset_after_ms) {
        set_error(db, SDB_ERROR, "the database does not answer (reconnecting)");
        return -1;
    }
    db->reset_after_ms = now + 1000;
    PQreset(db->c);
    if (PQstatus(db->c) != CONNECTION_OK) {
        set_error(db, SDB_ERROR, PQerrorMessage(db->c));
        return -1;
    }
    db->generation++;             /* a new session: nothing prepared, nothing LISTENed */
    db->listening = 0;
    return session_setup(db) == 0 ? 0 : -1;
}

static void typing_recall(struct pg_stmt *s);

static struct sdb *pg_open(const char *where, int create)
{
    (void)create;             /* the database itself is the operator's (CREATE DATABASE) */
    /* A server that does not answer fails a connect in 5 s, and a dead peer is found
     * by keepalives, not by a request waiting on it; the URL may say otherwise. */
    const char *const keys[] = {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                                "keepalives_count", "dbname", NULL};
    const char *const vals[] = {"5", "1", "10", "5", "3", where, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        log_error("cannot open database %s: %s", where, c ? PQerrorMessage(c) : "out of memory");
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, pg_quiet, NULL);
    struct pg *db = xcalloc(1, sizeof *db);
    db->base.e = &sdb_pg_engine;
    db->c = c;
    db->generation = 1;
    if (session_setup(db) != 0) {
        log_error("database %s: %s", where, db->err);
        PQfinish(c);
        free(db);
        return NULL;
    }
    return &db->base;
}

static void pg_close(struct sdb *db)
{
    PQfinish(P(db)->c);
    free(db);
}

static const char *pg_filename(const struct sdb *db)
{
    (void)db;
    return NULL;
}

static int pg_prepare(struct sdb *db, const char *sql, int persistent, struct sdb_stmt **out)
{
    struct pg_stmt *s = xcalloc(1, sizeof *s);
    s->persistent = persistent;
    s->base.e = &sdb_pg_engine;
    s->base.db = db;
    s->kind = pg_sql_kind(sql);
    s->sql = pg_sql_rewrite_marks(sql, &s->nparams, &s->marks, &s->nmarks);
    if (s->nparams) {
        s->p = xcalloc((size_t)s->nparams, sizeof *s->p);
        s->typed = xcalloc((size_t)s->nparams, 1);
        /* A parameter whose first place is "IS NULL" gets no type from it: sent with
         * its bound type from the start rather than after the server refuses. */
        char *seen = xcalloc((size_t)s->nparams, 1);
        for (int m = 0; m < s->nmarks; m++) {
            int k = s->marks[m].param - 1;
            if (!seen[k])
                s->typed[k] = (char)s->marks[m].null_test;
            seen[k] = 1;
        }
        for (int k = 0; k < s->nparams; k++)
            if (!seen[k])
                s->typed[k] = 1;            /* in no place at all: its bound type, or text */
        free(seen);
        typing_recall(s);
    }
    *out = &s->base;
    return SDB_OK;
}

static void drop_result(struct pg_stmt *s)
{
    for (int i = 0; i < s->nblob; i++) {
        if (s->blob[i])
            PQfreemem(s->blob[i]);
        s->blob[i] = NULL;
    }
    PQclear(s->res);
    s->res = NULL;
    s->row = s->nrows = s->ran = 0;
}

static struct param *param_at(struct pg_stmt *s, int i)
{
    if (i < 1 || i > s->nparams)
        return NULL;
    struct param *p = &s->p[i - 1];
    free(p->owned);
    memset(p, 0, sizeof *p);
    return p;
}

static int pg_bind_int64(struct sdb_stmt *st, int i, int64_t v)
{
    struct param *p = param_at(PS(st), i);
    if (!p)
        return SDB_ERROR;
    p->owned = xcalloc(1, 24);
    p->len = snprintf(p->owned, 24, "%lld", (long long)v);
    p->val = p->owned;
    p->type = OID_INT8;
    return SDB_OK;
}

static int pg_bind_double(struct sdb_stmt *st, int i, double v)
{
    struct param *p = param_at(PS(st), i);
    if (!p)
        return SDB_ERROR;
    p->owned = xcalloc(1, 40);
    p->len = snprintf(p->owned, 40, "%.17g", v);
    p->val = p->owned;
    p->type = OID_FLOAT8;
    return SDB_OK;
}

static int pg_bind_text(struct sdb_stmt *st, int i, const char *s, int n, int how)
{
    struct param *p = param_at(PS(st), i);
    if (!p)
        return SDB_ERROR;
    size_t len = n < 0 ? strlen(s) : (size_t)n;
    if (how == SDB_TRANSIENT || n >= 0) {
        p->owned = xcalloc(1, len + 1);    /* libpq reads text to its NUL */
        memcpy(p->owned, s, len);
        p->val = p->owned;
    } else {
        p->val = s;
    }
    p->len = (int)len;
    return SDB_OK;
}

static int pg_bind_blob(struct sdb_stmt *st, int i, const void *v, uint64_t n, int how)
{
    struct param *p = param_at(PS(st), i);
    if (!p || n > 0x7fffffff)
        return p ? SDB_TOOBIG : SDB_ERROR;
    if (how == SDB_TRANSIENT) {
        p->owned = xcalloc(1, n + 1);
        memcpy(p->owned, v, n);
        p->val = p->owned;
    } else {
        p->val = v;
    }
    p->len = (int)n;
    p->fmt = 1;
    p->type = OID_BYTEA;
    return SDB_OK;
}

static int pg_bind_null(struct sdb_stmt *st, int i)
{
    return param_at(PS(st), i) ? SDB_OK : SDB_ERROR;
}

/* The statement's text with NULL in the places of parameters bound to NULL;
 * NULL when none is. */
static char *with_nulls(const struct pg_stmt *s)
{
    int any = 0;
    for (int m = 0; m < s->nmarks && !any; m++)
        any = !s->p[s->marks[m].param - 1].val;
    if (!any)
        return NULL;
    size_t len = strlen(s->sql);
    char *t = xcalloc(1, len + (size_t)s->nmarks * 4 + 1);
    size_t o = 0, from = 0;
    for (int m = 0; m < s->nmarks; m++) {
        const struct pg_sql_mark *k = &s->marks[m];
        if (s->p[k->param - 1].val)
            continue;
        memcpy(t + o, s->sql + from, (size_t)k->off - from);
        o += (size_t)k->off - from;
        memcpy(t + o, "NULL", 4);
        o += 4;
        from = (size_t)(k->off + k->len);
    }
    memcpy(t + o, s->sql + from, len - from + 1);
    return t;
}

/* Transaction control the engine runs itself (pg_sql_kind). */
static int run_control(struct pg_stmt *s)
{
    struct pg *db = P(s->base.db);
    int rc = 0;
    switch (s->kind) {
    case PG_SQL_NOOP:
        return SDB_DONE;
    case PG_SQL_BEGIN_READ:
        rc = simple(db, "BEGIN ISOLATION LEVEL REPEATABLE READ");
        db->in_tx = rc == 0;
        break;
    case PG_SQL_BEGIN_WRITE: {
        char sql[96];
        snprintf(sql, sizeof sql, "BEGIN; SELECT pg_advisory_xact_lock(%lld)", (long long)PG_WRITER_LOCK);
        rc = simple(db, sql);
        if (rc != 0 && PQtransactionStatus(db->c) != PQTRANS_IDLE) {
            int code = db->code;
            char err[sizeof db->err];
            memcpy(err, db->err, sizeof err);
            simple(db, "ROLLBACK");
            set_error(db, code, err);
        }
        db->in_tx = rc == 0;
        break;
    }
    case PG_SQL_COMMIT: {
        /* A transaction an error aborted answers COMMIT with ROLLBACK: not a commit. */
        PGresult *r = PQexec(db->c, "COMMIT");
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK && strcmp(PQcmdStatus(r), "COMMIT") == 0;
        if (!ok)
            set_error(db, r && PQresultStatus(r) == PGRES_FATAL_ERROR
                              ? code_of(PQresultErrorField(r, PG_DIAG_SQLSTATE)) : SDB_ERROR,
                      r && *PQresultErrorMessage(r) ? PQresultErrorMessage(r) : "the transaction was rolled back");
        PQclear(r);
        rc = ok ? 0 : -1;
        db->in_tx = 0;
        break;
    }
    case PG_SQL_ROLLBACK:
        rc = PQtransactionStatus(db->c) == PQTRANS_IDLE ? 0 : simple(db, "ROLLBACK");
        db->in_tx = 0;
        break;
    default:
        return SDB_ERROR;
    }
    return rc == 0 ? SDB_DONE : db->code & 0xff;
}

/* Sends one statement and returns its result. Inside a transaction it runs under
 * a savepoint, sent with it in one pipeline (one round trip): a failure leaves the
 * transaction as it was, for the caller to go on or roll back as on SQLite. */
static PGresult *execute(struct pg *db, const char *name, const char *sql, int n, const Oid *types,
                         const char *const *vals, const int *lens, const int *fmts, int inside)
{
    if (!inside)
        return name ? PQexecPrepared(db->c, name, n, vals, lens, fmts, 0)
                    : PQexecParams(db->c, sql, n, types, vals, lens, fmts, 0);
    PGresult *res[3] = {NULL, NULL, NULL};
    int sent = PQenterPipelineMode(db->c) &&
               PQsendQueryParams(db->c, "SAVEPOINT sdb_statement", 0, NULL, NULL, NULL, NULL, 0) &&
               (name ? PQsendQueryPrepared(db->c, name, n, vals, lens, fmts, 0)
                     : PQsendQueryParams(db->c, sql, n, types, vals, lens, fmts, 0)) &&
               PQsendQueryParams(db->c, "RELEASE SAVEPOINT sdb_statement", 0, NULL, NULL, NULL, NULL, 0) &&
               PQpipelineSync(db->c);
    for (int q = 0; sent && q < 3; q++) {
        PGresult *r;
        while ((r = PQgetResult(db->c))) {      /* a query's results end with NULL */
            if (!res[q])
                res[q] = r;
            else
                PQclear(r);
        }
    }
    PGresult *r;
    while (sent && (r = PQgetResult(db->c))) {  /* the sync */
        int sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
        PQclear(r);
        if (sync)
            break;
    }
    PQexitPipelineMode(db->c);
    PQclear(res[0]);
    PQclear(res[2]);
    ExecStatusType rs = PQresultStatus(res[1]);
    if (!sent || !res[1] || (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK)) {
        PGresult *u = PQexec(db->c, "ROLLBACK TO SAVEPOINT sdb_statement; RELEASE SAVEPOINT sdb_statement");
        PQclear(u);
    }
    return res[1];
}

/* The type each parameter is sent with. Integers and reals go typed (int8, float8):
 * an untyped one takes its place's type, and GREATEST($1, 0) would make that an
 * int4 that a token count or a time in ms overflows. Text goes untyped, so the
 * server reads it as the column's type. Where a place wants another type
 * (substr(x, 1, $1) wants an int4) the integers go untyped (int_untyped); where a
 * place says nothing ($1 IS NULL alone) that parameter goes with its bound type
 * (typed[i]), as the server names it. */
static void param_types(const struct pg_stmt *s, const char *const *vals, Oid *types)
{
    for (int i = 0; i < s->nparams; i++) {
        unsigned t = s->p[i].type;
        if (!vals[i])
            types[i] = OID_TEXT;              /* unreferenced (a NULL is in the text) */
        else if (t == OID_BYTEA)
            types[i] = t;
        else if (t)
            types[i] = s->int_untyped && !s->typed[i] ? 0 : t;
        else
            types[i] = s->typed[i] ? OID_TEXT : 0;
    }
}

/* What the server taught about a statement's parameters (param_types), kept per
 * statement text for the process: the admin's statements are prepared anew each
 * call, and each would otherwise fail once before it is sent the right way. */
#define TYPING_SLOTS 256
static struct typing {
    uint64_t hash;                /* of the rewritten text; 0: free */
    int int_untyped;
    uint64_t typed;               /* parameters 1..64 */
} typings[TYPING_SLOTS];
static pthread_mutex_t typing_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t text_hash(const char *t)
{
    uint64_t h = 1469598103934665603ULL;      /* FNV-1a */
    for (; *t; t++)
        h = (h ^ (unsigned char)*t) * 1099511628211ULL;
    return h ? h : 1;
}

static void typing_recall(struct pg_stmt *s)
{
    uint64_t h = text_hash(s->sql);
    pthread_mutex_lock(&typing_lock);
    const struct typing *t = &typings[h % TYPING_SLOTS];
    if (t->hash == h) {
        s->int_untyped = t->int_untyped;
        for (int i = 0; i < s->nparams && i < 64; i++)
            s->typed[i] = (t->typed >> i) & 1;
    }
    pthread_mutex_unlock(&typing_lock);
}

static void typing_learn(const struct pg_stmt *s)
{
    uint64_t bits = 0;
    for (int i = 0; i < s->nparams && i < 64; i++)
        bits |= (uint64_t)(s->typed[i] != 0) << i;
    if (!bits && !s->int_untyped)
        return;                               /* the default: nothing to keep */
    uint64_t h = text_hash(s->sql);
    pthread_mutex_lock(&typing_lock);
    typings[h % TYPING_SLOTS] = (struct typing){h, s->int_untyped, bits};
    pthread_mutex_unlock(&typing_lock);
}

/* After a failed attempt: does another typing of the parameters deserve a try? */
static int retype(struct pg_stmt *s, const PGresult *r)
{
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    const char *at = msg ? strstr(msg, "parameter $") : NULL;
    int which = at ? atoi(at + 11) : 0;
    if (PQresultStatus(r) != PGRES_FATAL_ERROR || !state)
        return 0;
    if ((strcmp(state, "42P18") == 0 || strcmp(state, "42P08") == 0) && which >= 1 && which <= s->nparams &&
        !s->typed[which - 1]) {
        s->typed[which - 1] = 1;
        return 1;
    }
    if ((strcmp(state, "42883") == 0 || strcmp(state, "42725") == 0) && !s->int_untyped) {
        s->int_untyped = 1;                   /* a function or operator wants its own integer type */
        return 1;
    }
    return 0;
}

/* A persistent statement is prepared on the server once per session (parsed and
 * planned once). One the server cannot type without values ($1 IS NULL alone) is
 * sent whole each time instead. */
static void prepare_server(struct pg *db, struct pg_stmt *s, const char *const *vals, int inside)
{
    snprintf(s->name, sizeof s->name, "sdb_%llu", (unsigned long long)++db->names);
    Oid types[s->nparams ? s->nparams : 1];
    PGresult *r = NULL;
    for (int attempt = 0; attempt <= s->nparams + 1; attempt++) {
        PQclear(r);
        param_types(s, vals, types);
        for (int i = 0; i < s->nparams; i++)
            if (!vals[i] && !s->typed[i])
                types[i] = 0;                 /* no value to type it by: the server's inference */
        if (inside)
            PQclear(PQexec(db->c, "SAVEPOINT sdb_prepare"));
        r = PQprepare(db->c, s->name, s->sql, s->nparams, types);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (inside)
            PQclear(PQexec(db->c, ok ? "RELEASE SAVEPOINT sdb_prepare"
                                     : "ROLLBACK TO SAVEPOINT sdb_prepare; RELEASE SAVEPOINT sdb_prepare"));
        if (ok) {
            s->prepared = db->generation;
            PQclear(r);
            return;
        }
        if (!retype(s, r))
            break;
    }
    /* The statement itself cannot be prepared (its types): sent whole from now on. A
     * failure of the moment (a lock, the connection) is tried again next time. */
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (state && strncmp(state, "42", 2) == 0)
        s->unpreparable = 1;
    PQclear(r);
}

static int pg_step(struct sdb_stmt *st)
{
    struct pg_stmt *s = PS(st);
    struct pg *db = P(st->db);
    if (s->ran) {
        if (!s->res || ++s->row >= s->nrows)
            return SDB_DONE;
        for (int i = 0; i < s->nblob; i++)
            if (s->blob[i]) {
                PQfreemem(s->blob[i]);
                s->blob[i] = NULL;
            }
        return SDB_ROW;
    }
    s->ran = 1;
    if (ensure_connected(db) != 0) {
        if (s->kind == PG_SQL_ROLLBACK) {   /* the server rolled it back with the session */
            db->in_tx = 0;
            return SDB_DONE;
        }
        return db->code & 0xff;
    }
    if (s->kind != PG_SQL_OTHER)
        return run_control(s);
    const char *vals[s->nparams ? s->nparams : 1];
    int lens[s->nparams ? s->nparams : 1], fmts[s->nparams ? s->nparams : 1];
    Oid types[s->nparams ? s->nparams : 1];
    for (int i = 0; i < s->nparams; i++) {
        vals[i] = s->p[i].val;
        lens[i] = s->p[i].len;
        fmts[i] = s->p[i].fmt;
    }
    int inside = PQtransactionStatus(db->c) == PQTRANS_INTRANS;
    if (s->persistent && !s->unpreparable && s->prepared != db->generation)
        prepare_server(db, s, vals, inside);
    int prepared = s->persistent && !s->unpreparable && s->prepared == db->generation;
    /* Unprepared, a NULL is written into the text: the NULL literal takes any place's
     * type, where a parameter with no value has none to give. */
    char *text = prepared ? NULL : with_nulls(s);
    PGresult *r;
    ExecStatusType rs;
    int retyped = 0;
    for (int attempt = 0;; attempt++) {
        param_types(s, vals, types);
        r = execute(db, prepared ? s->name : NULL, text ? text : s->sql, s->nparams, types, vals, lens, fmts, inside);
        rs = PQresultStatus(r);
        if (prepared || attempt > s->nparams || !r || !retype(s, r))
            break;
        retyped = 1;
        PQclear(r);
    }
    if (retyped && (rs == PGRES_COMMAND_OK || rs == PGRES_TUPLES_OK))
        typing_learn(s);
    free(text);
    if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
        set_error(db, r ? code_of(PQresultErrorField(r, PG_DIAG_SQLSTATE)) : SDB_ERROR,
                  r ? PQresultErrorMessage(r) : PQerrorMessage(db->c));
        PQclear(r);
        return db->code & 0xff;
    }
    /* as sqlite3_changes: rows an INSERT, UPDATE or DELETE touched; a SELECT leaves it */
    const char *tag = PQcmdStatus(r), *n = PQcmdTuples(r);
    if (strncmp(tag, "INSERT", 6) == 0 || strncmp(tag, "UPDATE", 6) == 0 || strncmp(tag, "DELETE", 6) == 0)
        db->changes = n && *n ? strtoll(n, NULL, 10) : 0;
    db->code = SDB_OK;
    s->res = r;
    s->nrows = rs == PGRES_TUPLES_OK ? PQntuples(r) : 0;
    s->row = 0;
    int nf = PQnfields(r);
    if (nf > s->nblob) {
        s->blob = realloc(s->blob, (size_t)nf * sizeof *s->blob);
        s->blob_len = realloc(s->blob_len, (size_t)nf * sizeof *s->blob_len);
        if (!s->blob || !s->blob_len)
            abort();
        for (int i = s->nblob; i < nf; i++)
            s->blob[i] = NULL;
        s->nblob = nf;
    }
    return s->nrows > 0 ? SDB_ROW : SDB_DONE;
}

/* The current row's value of column i, NULL for SQL NULL or no row. */
static const char *value(struct pg_stmt *s, int i)
{
    if (!s->res || s->row >= s->nrows || i < 0 || i >= PQnfields(s->res) || PQgetisnull(s->res, s->row, i))
        return NULL;
    return PQgetvalue(s->res, s->row, i);
}

static int64_t pg_column_int64(struct sdb_stmt *st, int i)
{
    struct pg_stmt *s = PS(st);
    const char *v = value(s, i);
    if (!v)
        return 0;
    if (PQftype(s->res, i) == OID_BOOL)
        return v[0] == 't';
    char *end;
    long long n = strtoll(v, &end, 10);
    if (*end == '.' || *end == 'e' || *end == 'E')
        return (int64_t)strtod(v, NULL);
    return n;
}

static double pg_column_double(struct sdb_stmt *st, int i)
{
    const char *v = value(PS(st), i);
    return v ? strtod(v, NULL) : 0.0;
}

static const unsigned char *pg_column_text(struct sdb_stmt *st, int i)
{
    return (const unsigned char *)value(PS(st), i);
}

static const void *pg_column_blob(struct sdb_stmt *st, int i)
{
    struct pg_stmt *s = PS(st);
    const char *v = value(s, i);
    if (!v)
        return NULL;
    if (PQftype(s->res, i) != OID_BYTEA)
        return v;
    if (!s->blob[i]) {
        size_t n = 0;
        s->blob[i] = PQunescapeBytea((const unsigned char *)v, &n);
        s->blob_len[i] = n;
    }
    return s->blob_len[i] ? s->blob[i] : NULL;      /* SQLite's empty blob is NULL too */
}

static int pg_column_bytes(struct sdb_stmt *st, int i)
{
    struct pg_stmt *s = PS(st);
    const char *v = value(s, i);
    if (!v)
        return 0;
    if (PQftype(s->res, i) != OID_BYTEA)
        return PQgetlength(s->res, s->row, i);
    pg_column_blob(st, i);
    return s->blob[i] ? (int)s->blob_len[i] : 0;
}

static int pg_column_type(struct sdb_stmt *st, int i)
{
    struct pg_stmt *s = PS(st);
    const char *v = value(s, i);
    if (!v)
        return SDB_NULL;
    switch (PQftype(s->res, i)) {
    case OID_INT2: case OID_INT4: case OID_INT8: case OID_OID: case OID_BOOL:
        return SDB_INTEGER;
    case OID_FLOAT4: case OID_FLOAT8:
        return SDB_FLOAT;
    case OID_NUMERIC:                       /* sum() of integers is numeric here */
        return strpbrk(v, ".eE") ? SDB_FLOAT : SDB_INTEGER;
    case OID_BYTEA:
        return SDB_BLOB;
    default:
        return SDB_TEXT;
    }
}

static int pg_reset(struct sdb_stmt *st)
{
    drop_result(PS(st));
    return SDB_OK;
}

static int pg_clear_bindings(struct sdb_stmt *st)
{
    struct pg_stmt *s = PS(st);
    for (int i = 0; i < s->nparams; i++) {
        free(s->p[i].owned);
        memset(&s->p[i], 0, sizeof s->p[i]);
    }
    return SDB_OK;
}

static int pg_finalize(struct sdb_stmt *st)
{
    struct pg_stmt *s = PS(st);
    struct pg *db = P(st->db);
    if (s->prepared && s->prepared == db->generation && PQstatus(db->c) == CONNECTION_OK) {
        char sql[64];
        snprintf(sql, sizeof sql, "DEALLOCATE %s", s->name);
        if (PQtransactionStatus(db->c) == PQTRANS_IDLE)
            PQclear(PQexec(db->c, sql));
    }
    drop_result(s);
    pg_clear_bindings(st);
    free(s->p);
    free(s->typed);
    free(s->blob);
    free(s->blob_len);
    free(s->sql);
    free(s->marks);
    free(s);
    return SDB_OK;
}

/* A script: each statement as a prepared one would run (no parameters). */
static int pg_exec(struct sdb *db, const char *sql)
{
    const char *p = sql;
    char *one;
    int rc = SDB_OK;
    while (rc == SDB_OK && (one = pg_sql_next(&p))) {
        struct sdb_stmt *st;
        pg_prepare(db, one, 0, &st);
        int r;
        while ((r = pg_step(st)) == SDB_ROW)
            ;
        if (r != SDB_DONE)
            rc = r;
        pg_finalize(st);
        free(one);
    }
    return rc;
}

static const char *pg_errmsg(struct sdb *db) { return P(db)->code == SDB_OK ? "not an error" : P(db)->err; }
static int pg_extended_errcode(struct sdb *db) { return P(db)->code; }
static int64_t pg_changes(struct sdb *db) { return P(db)->changes; }

static int64_t pg_last_insert_rowid(struct sdb *db)
{
    /* No trigger of sluice's inserts into a table with an id, so the session's
     * last sequence value is the row's. */
    int inside = PQtransactionStatus(P(db)->c) == PQTRANS_INTRANS;
    if (inside)
        simple(P(db), "SAVEPOINT sdb_lastval");
    PGresult *r = PQexec(P(db)->c, "SELECT lastval()");
    int64_t id = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10)
                                                                           : 0;
    PQclear(r);
    if (inside)
        simple(P(db), id ? "RELEASE SAVEPOINT sdb_lastval" : "ROLLBACK TO SAVEPOINT sdb_lastval");
    return id;
}

static int pg_get_autocommit(struct sdb *db) { return PQtransactionStatus(P(db)->c) == PQTRANS_IDLE; }

static int pg_busy_timeout(struct sdb *db, int ms)
{
    char sql[64];
    snprintf(sql, sizeof sql, "SET lock_timeout = %d", ms > 0 ? ms : 0);
    P(db)->lock_ms = ms;
    return simple(P(db), sql) == 0 ? SDB_OK : SDB_ERROR;
}

static int pg_wait_notice(struct sdb *sdb, const char *channel, int timeout_ms)
{
    struct pg *db = P(sdb);
    if (!db->listening) {
        char *id = PQescapeIdentifier(db->c, channel, strlen(channel));
        char sql[160];
        snprintf(sql, sizeof sql, "LISTEN %s", id ? id : "sluice_config");
        PQfreemem(id);
        if (simple(db, sql) != 0)
            return -1;
        db->listening = 1;
    }
    int got = 0;
    PGnotify *n;
    PQconsumeInput(db->c);
    while ((n = PQnotifies(db->c))) {           /* arrived with an earlier result */
        got = 1;
        PQfreemem(n);
    }
    if (got)
        return 1;
    struct pollfd pfd = {PQsocket(db->c), POLLIN, 0};
    if (pfd.fd < 0) {
        db->listening = 0;
        return -1;
    }
    if (poll(&pfd, 1, timeout_ms) <= 0)
        return 0;
    if (!PQconsumeInput(db->c)) {
        db->listening = 0;                      /* the connection broke: LISTEN again after it is back */
        return -1;
    }
    while ((n = PQnotifies(db->c))) {
        got = 1;
        PQfreemem(n);
    }
    return got;
}

const struct sdb_engine sdb_pg_engine = {
    .name = "postgresql",
    .claims = pg_claims,
    .open = pg_open,
    .close = pg_close,
    .filename = pg_filename,
    .prepare = pg_prepare,
    .bind_int64 = pg_bind_int64,
    .bind_double = pg_bind_double,
    .bind_text = pg_bind_text,
    .bind_blob = pg_bind_blob,
    .bind_null = pg_bind_null,
    .step = pg_step,
    .column_int64 = pg_column_int64,
    .column_double = pg_column_double,
    .column_text = pg_column_text,
    .column_blob = pg_column_blob,
    .column_bytes = pg_column_bytes,
    .column_type = pg_column_type,
    .reset = pg_reset,
    .clear_bindings = pg_clear_bindings,
    .finalize = pg_finalize,
    .exec = pg_exec,
    .errmsg = pg_errmsg,
    .extended_errcode = pg_extended_errcode,
    .changes = pg_changes,
    .last_insert_rowid = pg_last_insert_rowid,
    .get_autocommit = pg_get_autocommit,
    .busy_timeout = pg_busy_timeout,
    .create_function3 = NULL,
    .wait_notice = pg_wait_notice,
};

#endif
