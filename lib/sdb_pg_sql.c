/* sdb_pg_sql.c: rewriting sluice's SQLite-dialect SQL for PostgreSQL.
 *
 * The SQL in the code and in sql/NNN_*.sql is SQLite's, the one source; what
 * PostgreSQL spells differently is rewritten here at the token level, so a
 * string literal or a comment is never touched. Only what sluice uses is known:
 * an unknown construct goes through as it is and PostgreSQL's error names it. */
#include "sdb_pg_sql.h"

#include "buf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum tk { TK_SPACE, TK_COMMENT, TK_WORD, TK_NUM, TK_STR, TK_QID, TK_PARAM, TK_PUNCT };
struct tok {
    enum tk k;
    const char *p;
    size_t n;
};
struct toks {
    struct tok *t;
    size_t n, cap;
};

static void push(struct toks *ts, enum tk k, const char *p, size_t n)
{
    if (ts->n == ts->cap) {
        ts->cap = ts->cap ? ts->cap * 2 : 64;
        ts->t = realloc(ts->t, ts->cap * sizeof *ts->t);
        if (!ts->t)
            abort();
    }
    ts->t[ts->n++] = (struct tok){k, p, n};
}

/* Quoted runs end at their closing quote; a doubled quote is one inside. */
static size_t quoted(const char *s, char q)
{
    size_t i = 1;
    for (; s[i]; i++)
        if (s[i] == q) {
            if (s[i + 1] != q)
                return i + 1;
            i++;
        }
    return i;
}

/* The length of a dollar quote's opening tag at s ("$fn$", "$$"), 0 if none. */
static size_t dollar_tag(const char *s)
{
    size_t i = 1;
    if (isdigit((unsigned char)s[1]))
        return 0;                             /* $1: a parameter */
    while (isalnum((unsigned char)s[i]) || s[i] == '_')
        i++;
    return s[i] == '$' ? i + 1 : 0;
}

static void lex(const char *s, struct toks *ts)
{
    while (*s) {
        const char *b = s;
        enum tk k;
        if (isspace((unsigned char)*s)) {
            while (isspace((unsigned char)*s))
                s++;
            k = TK_SPACE;
        } else if (s[0] == '-' && s[1] == '-') {
            while (*s && *s != '\n')
                s++;
            k = TK_COMMENT;
        } else if (s[0] == '/' && s[1] == '*') {
            const char *e = strstr(s + 2, "*/");
            s = e ? e + 2 : s + strlen(s);
            k = TK_COMMENT;
        } else if (*s == '\'' || *s == '"') {
            k = *s == '\'' ? TK_STR : TK_QID;
            s += quoted(s, *s);
        } else if (*s == '$' && dollar_tag(s)) {  /* PostgreSQL's $tag$ ... $tag$ (our own DDL) */
            size_t t = dollar_tag(s);
            const char *e = s + t;
            while (*e && strncmp(e, s, t) != 0)
                e++;
            s = *e ? e + t : e;
            k = TK_STR;
        } else if (*s == '?') {
            s++;
            while (isdigit((unsigned char)*s))
                s++;
            k = TK_PARAM;
        } else if (isalpha((unsigned char)*s) || *s == '_') {
            while (isalnum((unsigned char)*s) || *s == '_' || *s == '$')
                s++;
            k = TK_WORD;
        } else if (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) {
            while (isalnum((unsigned char)*s) || *s == '.' ||
                   ((*s == '+' || *s == '-') && (s[-1] == 'e' || s[-1] == 'E')))
                s++;
            k = TK_NUM;
        } else {
            s += (s[0] == '=' && s[1] == '=') || (s[0] == '|' && s[1] == '|') ? 2 : 1;
            k = TK_PUNCT;
        }
        push(ts, k, b, (size_t)(s - b));
    }
}

static int is_word(const struct tok *t, const char *w)
{
    return t->k == TK_WORD && t->n == strlen(w) && strncasecmp(t->p, w, t->n) == 0;
}

static int is_punct(const struct tok *t, char c) { return t->k == TK_PUNCT && t->n == 1 && t->p[0] == c; }

static int is_str(const struct tok *t, const char *lit)
{
    return t->k == TK_STR && t->n == strlen(lit) && strncasecmp(t->p, lit, t->n) == 0;
}

/* The next token at or after i that is not space or comment; end if none. */
static size_t sig(const struct toks *ts, size_t i, size_t end)
{
    while (i < end && (ts->t[i].k == TK_SPACE || ts->t[i].k == TK_COMMENT))
        i++;
    return i;
}

/* The ")" closing the "(" at i; end if none. */
static size_t closing(const struct toks *ts, size_t i, size_t end)
{
    int depth = 0;
    for (; i < end; i++) {
        if (is_punct(&ts->t[i], '('))
            depth++;
        else if (is_punct(&ts->t[i], ')') && --depth == 0)
            return i;
    }
    return end;
}

/* The tokens from..to (the arguments of a call) split at top-level commas into
 * at most max ranges; their count. */
static int args_of(const struct toks *ts, size_t from, size_t to, size_t *starts, size_t *ends, int max)
{
    int n = 0, depth = 0;
    size_t s = from;
    for (size_t i = from; i < to; i++) {
        if (is_punct(&ts->t[i], '('))
            depth++;
        else if (is_punct(&ts->t[i], ')'))
            depth--;
        else if (depth == 0 && is_punct(&ts->t[i], ',')) {
            if (n < max) {
                starts[n] = s;
                ends[n] = i;
            }
            n++;
            s = i + 1;
        }
    }
    if (n < max) {
        starts[n] = s;
        ends[n] = to;
    }
    return n + 1;
}

/* The only token of a range (spaces aside), or NULL. */
static const struct tok *only(const struct toks *ts, size_t from, size_t to)
{
    size_t i = sig(ts, from, to);
    return i < to && sig(ts, i + 1, to) == to ? &ts->t[i] : NULL;
}

struct rw {
    struct buf out;
    int maxp;         /* the highest parameter so far */
    int ignore;       /* INSERT OR IGNORE: ON CONFLICT DO NOTHING at the end */
    struct pg_sql_mark *marks;
    int nmarks;
    char target[64];  /* INSERT INTO's table */
    int upsert;       /* inside DO UPDATE SET ... before RETURNING */
};

/* The last token before i that is not space or comment; from if none. */
static size_t sig_before(const struct toks *ts, size_t i, size_t from)
{
    while (i > from) {
        i--;
        if (ts->t[i].k != TK_SPACE && ts->t[i].k != TK_COMMENT)
            return i;
    }
    return (size_t)-1;
}

static int is_keyword(const struct tok *t)
{
    static const char *const w[] = {"CASE", "WHEN", "THEN", "ELSE", "END", "AND", "OR", "NOT", "NULL", "IS",
                                    "IN", "BETWEEN", "DISTINCT", "FROM", "TRUE", "FALSE", "AS", "CAST", "BIGINT",
                                    "INTEGER", "REAL", "TEXT", "DOUBLE", "PRECISION", "WHERE", "SET", "LIKE",
                                    "ILIKE", "ESCAPE", "COLLATE", "EXISTS", "SELECT", "RETURNING", "EXCLUDED"};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (is_word(t, w[i]))
            return 1;
    return 0;
}

/* In DO UPDATE, a bare column is ambiguous to PostgreSQL (the row and excluded
 * both have it) where SQLite takes the row's: such a column gets the table's name. */
static int upsert_column(const struct toks *ts, size_t i, size_t from, size_t to)
{
    const struct tok *t = &ts->t[i];
    if (t->k != TK_WORD || is_keyword(t))
        return 0;
    size_t n = sig(ts, i + 1, to), p = sig_before(ts, i, from);
    if (n < to && (is_punct(&ts->t[n], '(') || is_punct(&ts->t[n], '.')))
        return 0;
    if (p != (size_t)-1 && is_punct(&ts->t[p], '.'))
        return 0;
    /* the column assigned (SET col = ...) takes no qualifier */
    if (n < to && is_punct(&ts->t[n], '=') && p != (size_t)-1 && (is_word(&ts->t[p], "SET") || is_punct(&ts->t[p], ',')))
        return 0;
    return 1;
}

/* The buffer's text, malloc'd; "" when nothing was written. */
static char *text_of(struct buf *b)
{
    if (b->len == 0) {
        buf_free(b);
        char *e = strdup("");
        if (!e)
            abort();
        return e;
    }
    return b->data;
}

/* floor: PostgreSQL rounds a cast to an integer where SQLite truncates ('%s' is the
 * second that began, as time() says) */
#define EPOCH_NOW "CAST(floor(EXTRACT(EPOCH FROM statement_timestamp())) AS BIGINT)"

static void rewrite(const struct toks *ts, size_t from, size_t to, struct rw *c);

/* A function call at i (a word followed by "(") that the dialects spell apart;
 * the token after what was written, or 0 when it is not one of those. */
static size_t rewrite_call(const struct toks *ts, size_t i, size_t to, struct rw *c)
{
    size_t open = sig(ts, i + 1, to);
    if (open >= to || !is_punct(&ts->t[open], '('))
        return 0;
    size_t close = closing(ts, open, to);
    if (close >= to)
        return 0;
    size_t s[3], e[3];
    int n = args_of(ts, open + 1, close, s, e, 3);
    const struct tok *w = &ts->t[i];
    const struct tok *a1 = n >= 2 ? only(ts, s[1], e[1]) : NULL;
    const struct tok *a2 = n >= 3 ? only(ts, s[2], e[2]) : NULL;
    if (is_word(w, "strftime") && n == 2 && only(ts, s[0], e[0]) && is_str(only(ts, s[0], e[0]), "'%s'") && a1 &&
        is_str(a1, "'now'")) {
        buf_puts(&c->out, EPOCH_NOW);
        return close + 1;
    }
    if (is_word(w, "julianday") && n == 1 && only(ts, s[0], e[0]) && is_str(only(ts, s[0], e[0]), "'now'")) {
        buf_puts(&c->out, "(EXTRACT(EPOCH FROM statement_timestamp()) / 86400.0 + 2440587.5)");
        return close + 1;
    }
    if (is_word(w, "date") && n >= 2 && a1 && is_str(a1, "'unixepoch'") &&
        (n == 2 || (n == 3 && a2 && is_str(a2, "'localtime'")))) {
        buf_puts(&c->out, "to_char(to_timestamp(");
        rewrite(ts, s[0], e[0], c);
        buf_puts(&c->out, n == 3 ? "), 'YYYY-MM-DD')" : ") AT TIME ZONE 'UTC', 'YYYY-MM-DD')");
        return close + 1;
    }
    if ((is_word(w, "max") || is_word(w, "min")) && n >= 2) {   /* scalar, not the aggregate */
        buf_puts(&c->out, is_word(w, "max") ? "GREATEST" : "LEAST");
        return i + 1;
    }
    if (is_word(w, "typeof") && n == 1) {     /* SQLite's storage class names */
        buf_puts(&c->out, "(CASE WHEN (");
        rewrite(ts, s[0], e[0], c);
        buf_puts(&c->out, ") IS NULL THEN 'null' WHEN pg_typeof(");
        rewrite(ts, s[0], e[0], c);
        buf_puts(&c->out, ")::text IN ('bigint', 'integer', 'smallint') THEN 'integer' WHEN pg_typeof(");
        rewrite(ts, s[0], e[0], c);
        buf_puts(&c->out, ")::text IN ('double precision', 'real', 'numeric') THEN 'real' WHEN pg_typeof(");
        rewrite(ts, s[0], e[0], c);
        buf_puts(&c->out, ")::text = 'bytea' THEN 'blob' ELSE 'text' END)");
        return close + 1;
    }
    if (is_word(w, "total") && n == 1) {      /* a sum that is 0 over no rows */
        buf_puts(&c->out, "COALESCE(SUM(");
        rewrite(ts, s[0], e[0], c);
        buf_puts(&c->out, "), 0)");
        return close + 1;
    }
    if (is_word(w, "ifnull")) {
        buf_puts(&c->out, "COALESCE");
        return i + 1;
    }
    return 0;
}

static void rewrite(const struct toks *ts, size_t from, size_t to, struct rw *c)
{
    for (size_t i = from; i < to;) {
        const struct tok *t = &ts->t[i];
        if (t->k == TK_PARAM) {
            int n = t->n > 1 ? atoi(t->p + 1) : c->maxp + 1;
            if (n > c->maxp)
                c->maxp = n;
            size_t off = c->out.len;
            buf_printf(&c->out, "$%d", n);
            c->marks = realloc(c->marks, (size_t)(c->nmarks + 1) * sizeof *c->marks);
            if (!c->marks)
                abort();
            size_t nx = sig(ts, i + 1, to);
            c->marks[c->nmarks++] = (struct pg_sql_mark){(int)off, (int)(c->out.len - off), n,
                                                          nx < to && is_word(&ts->t[nx], "IS")};
            i++;
            continue;
        }
        if (t->k == TK_PUNCT && t->n == 2 && t->p[0] == '=') {        /* == */
            buf_puts(&c->out, "=");
            i++;
            continue;
        }
        if (t->k == TK_WORD) {
            if (is_word(t, "RETURNING") || is_word(t, "SELECT"))
                c->upsert = 0;      /* a subquery's columns are its own: left as they are */
            if (c->upsert && c->target[0] && upsert_column(ts, i, from, to)) {
                buf_printf(&c->out, "%s.", c->target);
                buf_append(&c->out, t->p, t->n);
                i++;
                continue;
            }
            size_t next = rewrite_call(ts, i, to, c);
            if (next) {
                i = next;
                continue;
            }
            size_t j = sig(ts, i + 1, to), k = j < to ? sig(ts, j + 1, to) : to;
            if (is_word(t, "INTO") && j < to && (ts->t[j].k == TK_WORD || ts->t[j].k == TK_QID) &&
                ts->t[j].n < sizeof c->target)
                snprintf(c->target, sizeof c->target, "%.*s", (int)ts->t[j].n, ts->t[j].p);
            if (is_word(t, "UPDATE") && j < to && is_word(&ts->t[j], "SET")) {
                size_t d = sig_before(ts, i, from);
                if (d != (size_t)-1 && is_word(&ts->t[d], "DO")) {
                    buf_append(&c->out, t->p, t->n);
                    for (size_t x = i + 1; x <= j; x++)
                        buf_append(&c->out, ts->t[x].p, ts->t[x].n);
                    c->upsert = 1;
                    i = j + 1;
                    continue;
                }
            }
            if (is_word(t, "INSERT") && j < to && is_word(&ts->t[j], "OR") && k < to &&
                is_word(&ts->t[k], "IGNORE")) {
                buf_puts(&c->out, "INSERT");
                c->ignore = 1;
                i = k + 1;
                continue;
            }
            if (is_word(t, "AS") && j < to && (is_word(&ts->t[j], "INTEGER") || is_word(&ts->t[j], "REAL"))) {
                buf_puts(&c->out, is_word(&ts->t[j], "INTEGER") ? "AS BIGINT" : "AS DOUBLE PRECISION");
                i = j + 1;
                continue;
            }
            if (is_word(t, "IS") && j < to) {      /* SQLite's IS compares values, NULL-safe */
                const struct tok *x = &ts->t[j], *y = is_word(x, "NOT") && k < to ? &ts->t[k] : NULL;
                const struct tok *v = y ? y : x;
                int keyword = is_word(v, "NULL") || is_word(v, "DISTINCT") || is_word(v, "TRUE") ||
                              is_word(v, "FALSE") || (!y && is_word(x, "NOT"));
                if (!keyword) {
                    buf_puts(&c->out, y ? "IS DISTINCT FROM " : "IS NOT DISTINCT FROM ");
                    i = y ? k : j;
                    continue;
                }
            }
            if (is_word(t, "LIKE")) {
                /* SQLite's LIKE ignores ASCII case and has no escape character unless
                 * one is given; PostgreSQL's takes a backslash as one. */
                buf_puts(&c->out, "ILIKE");
                size_t op = j, after = op < to ? sig(ts, op + 1, to) : to;
                if (op < to && (ts->t[op].k == TK_PARAM || ts->t[op].k == TK_STR) &&
                    !(after < to && is_word(&ts->t[after], "ESCAPE"))) {
                    for (size_t x = i + 1; x < op; x++)
                        buf_append(&c->out, ts->t[x].p, ts->t[x].n);
                    rewrite(ts, op, op + 1, c);
                    buf_puts(&c->out, " ESCAPE ''");
                    i = op + 1;
                    continue;
                }
                i++;
                continue;
            }
        }
        buf_append(&c->out, t->p, t->n);
        i++;
    }
}

/* Where trailing spaces, comments and semicolons begin. */
static size_t trimmed_end(const struct toks *ts)
{
    size_t end = ts->n;
    while (end > 0 && (ts->t[end - 1].k == TK_SPACE || ts->t[end - 1].k == TK_COMMENT ||
                       is_punct(&ts->t[end - 1], ';')))
        end--;
    return end;
}

char *pg_sql_rewrite(const char *sql, int *nparams)
{
    return pg_sql_rewrite_marks(sql, nparams, NULL, NULL);
}

char *pg_sql_rewrite_marks(const char *sql, int *nparams, struct pg_sql_mark **marks, int *nmarks)
{
    struct toks ts = {NULL, 0, 0};
    lex(sql, &ts);
    struct rw c = {{NULL, 0, 0, 0}, 0, 0, NULL, 0, "", 0};
    buf_init(&c.out, 0);
    size_t end = trimmed_end(&ts);
    rewrite(&ts, 0, end, &c);
    if (c.ignore)
        buf_puts(&c.out, " ON CONFLICT DO NOTHING");
    free(ts.t);
    if (nparams)
        *nparams = c.maxp;
    if (marks) {
        *marks = c.marks;
        *nmarks = c.nmarks;
    } else {
        free(c.marks);
    }
    return text_of(&c.out);
}

enum pg_sql_kind pg_sql_kind(const char *sql)
{
    struct toks ts = {NULL, 0, 0};
    lex(sql, &ts);
    enum pg_sql_kind k = PG_SQL_OTHER;
    size_t end = trimmed_end(&ts);
    size_t a = sig(&ts, 0, end), b = a < end ? sig(&ts, a + 1, end) : end;
    if (a < end) {
        const struct tok *t = &ts.t[a], *u = b < end ? &ts.t[b] : NULL;
        if (is_word(t, "PRAGMA"))
            k = PG_SQL_NOOP;
        else if (is_word(t, "BEGIN"))
            k = u && (is_word(u, "IMMEDIATE") || is_word(u, "EXCLUSIVE")) ? PG_SQL_BEGIN_WRITE : PG_SQL_BEGIN_READ;
        else if (is_word(t, "COMMIT") || is_word(t, "END"))
            k = PG_SQL_COMMIT;
        else if (is_word(t, "ROLLBACK") && !(u && is_word(u, "TO")))
            k = PG_SQL_ROLLBACK;
    }
    free(ts.t);
    return k;
}

/* ---- schema ---- */

/* A column's type as PostgreSQL's: SQLite's integers are 64-bit. */
static const char *column_type(const struct tok *t)
{
    static const struct {
        const char *lite, *pg;
    } types[] = {
        {"INTEGER", "BIGINT"}, {"INT", "BIGINT"}, {"REAL", "DOUBLE PRECISION"}, {"FLOAT", "DOUBLE PRECISION"},
        {"DOUBLE", "DOUBLE PRECISION"}, {"BLOB", "BYTEA"}, {"TEXT", "TEXT"}, {"NUMERIC", "NUMERIC"},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (is_word(t, types[i].lite))
            return types[i].pg;
    return NULL;
}

static int is_constraint_word(const struct tok *t)
{
    static const char *const w[] = {"PRIMARY", "NOT", "NULL", "DEFAULT", "REFERENCES", "UNIQUE", "CHECK",
                                    "COLLATE", "CONSTRAINT", "FOREIGN"};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (is_word(t, w[i]))
            return 1;
    return 0;
}

/* One column definition or table constraint (from..to inside the table's parentheses). */
static void table_item(const struct toks *ts, size_t from, size_t to, struct rw *c)
{
    size_t name = sig(ts, from, to);
    if (name >= to)
        return;
    for (size_t i = from; i < name; i++)
        buf_append(&c->out, ts->t[i].p, ts->t[i].n);
    const struct tok *n = &ts->t[name];
    if (is_word(n, "PRIMARY") || is_word(n, "UNIQUE") || is_word(n, "CHECK") || is_word(n, "FOREIGN") ||
        is_word(n, "CONSTRAINT")) {
        rewrite(ts, name, to, c);           /* a table constraint */
        return;
    }
    buf_append(&c->out, n->p, n->n);
    size_t ty = sig(ts, name + 1, to);
    const char *pg = ty < to ? column_type(&ts->t[ty]) : NULL;
    if (!pg) {
        if (ty >= to || is_constraint_word(&ts->t[ty]))
            buf_puts(&c->out, " TEXT");     /* no type: SQLite keeps any value; text holds them */
        rewrite(ts, name + 1, to, c);
        return;
    }
    for (size_t i = name + 1; i < ty; i++)
        buf_append(&c->out, ts->t[i].p, ts->t[i].n);
    /* INTEGER PRIMARY KEY is SQLite's rowid: the next id when none is given. */
    size_t pk = sig(ts, ty + 1, to), key = pk < to ? sig(ts, pk + 1, to) : to;
    if (strcmp(pg, "BIGINT") == 0 && pk < to && is_word(&ts->t[pk], "PRIMARY") && key < to &&
        is_word(&ts->t[key], "KEY")) {
        buf_puts(&c->out, "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
        size_t after = key + 1, ai = sig(ts, after, to);
        if (ai < to && is_word(&ts->t[ai], "AUTOINCREMENT"))
            after = ai + 1;
        rewrite(ts, after, to, c);
        return;
    }
    buf_puts(&c->out, pg);
    size_t after = ty + 1;
    /* DOUBLE PRECISION written out in SQLite too */
    size_t p2 = sig(ts, after, to);
    if (is_word(&ts->t[ty], "DOUBLE") && p2 < to && is_word(&ts->t[p2], "PRECISION"))
        after = p2 + 1;
    rewrite(ts, after, to, c);
}

static char *schema_table(const struct toks *ts, size_t open, size_t end, char *why, size_t cap)
{
    size_t close = closing(ts, open, end);
    if (close >= end) {
        snprintf(why, cap, "a table without its closing parenthesis");
        return NULL;
    }
    struct rw c = {{NULL, 0, 0, 0}, 0, 0, NULL, 0, "", 0};
    buf_init(&c.out, 0);
    for (size_t i = 0; i <= open; i++)
        buf_append(&c.out, ts->t[i].p, ts->t[i].n);
    int depth = 0;
    size_t s = open + 1;
    for (size_t i = open + 1; i <= close; i++) {
        if (i < close && is_punct(&ts->t[i], '('))
            depth++;
        else if (i < close && is_punct(&ts->t[i], ')'))
            depth--;
        else if (i == close || (depth == 0 && is_punct(&ts->t[i], ','))) {
            table_item(ts, s, i, &c);
            buf_append(&c.out, ts->t[i].p, ts->t[i].n);
            s = i + 1;
        }
    }
    /* WITHOUT ROWID and the like after the parenthesis are SQLite's storage choices */
    free(c.marks);
    return text_of(&c.out);
}

/* The range is one call, word(...), which an index takes without parentheses. */
static int is_call(const struct toks *ts, size_t from, size_t to)
{
    size_t f = sig(ts, from, to);
    if (f >= to || ts->t[f].k != TK_WORD)
        return 0;
    size_t o = sig(ts, f + 1, to);
    if (o >= to || !is_punct(&ts->t[o], '('))
        return 0;
    size_t cl = closing(ts, o, to);
    return cl < to && sig(ts, cl + 1, to) == to;
}

/* An index: every expression among its columns in parentheses of its own. */
static char *schema_index(const struct toks *ts, size_t open, size_t end)
{
    size_t close = closing(ts, open, end);
    struct rw c = {{NULL, 0, 0, 0}, 0, 0, NULL, 0, "", 0};
    buf_init(&c.out, 0);
    rewrite(ts, 0, open + 1, &c);
    if (close < end) {
        size_t s[64], e[64];
        int n = args_of(ts, open + 1, close, s, e, 64);
        for (int a = 0; a < n && a < 64; a++) {
            if (a)
                buf_puts(&c.out, ",");
            const struct tok *one = only(ts, s[a], e[a]);
            int plain = one && (one->k == TK_WORD || one->k == TK_QID);
            int call = is_call(ts, s[a], e[a]);
            if (!plain && !call)
                buf_puts(&c.out, "(");
            rewrite(ts, s[a], e[a], &c);
            if (!plain && !call)
                buf_puts(&c.out, ")");
        }
        rewrite(ts, close, end, &c);
    }
    free(c.marks);
    return text_of(&c.out);
}

/* A trigger: its body becomes a PL/pgSQL function, and the trigger calls it for
 * each row (SQLite's triggers are all row triggers). */
static char *schema_trigger(const struct toks *ts, size_t end, char *why, size_t cap)
{
    size_t i = sig(ts, 0, end);                     /* CREATE */
    i = sig(ts, i + 1, end);                        /* TRIGGER */
    i = sig(ts, i + 1, end);
    if (i < end && is_word(&ts->t[i], "IF"))        /* IF NOT EXISTS */
        i = sig(ts, sig(ts, sig(ts, i + 1, end) + 1, end) + 1, end);
    if (i >= end) {
        snprintf(why, cap, "a trigger without a name");
        return NULL;
    }
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)ts->t[i].n, ts->t[i].p);
    size_t head = i + 1, when = end, body = end;
    for (size_t j = head; j < end; j++) {
        if (when == end && body == end && is_word(&ts->t[j], "WHEN"))
            when = j;
        if (is_word(&ts->t[j], "BEGIN")) {
            body = j;
            break;
        }
    }
    size_t last = end;                              /* the END closing the body */
    while (last > body && !is_word(&ts->t[last - 1], "END"))
        last--;
    if (body >= end || last <= body) {
        snprintf(why, cap, "trigger %s without BEGIN ... END", name);
        return NULL;
    }
    struct rw c = {{NULL, 0, 0, 0}, 0, 0, NULL, 0, "", 0};
    buf_init(&c.out, 0);
    buf_printf(&c.out, "CREATE OR REPLACE FUNCTION sluice_trigger_%s() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN",
               name);
    rewrite(ts, body + 1, last - 1, &c);
    buf_puts(&c.out, " RETURN NULL; END $fn$;\nCREATE TRIGGER ");
    buf_puts(&c.out, name);
    size_t head_end = when < body ? when : body;
    rewrite(ts, head, head_end, &c);
    int each_row = 0;
    for (size_t j = head; j < head_end; j++)
        each_row |= is_word(&ts->t[j], "EACH");
    if (!each_row)
        buf_puts(&c.out, " FOR EACH ROW");
    if (when < body) {
        buf_puts(&c.out, " WHEN (");
        rewrite(ts, sig(ts, when + 1, body), body, &c);
        buf_puts(&c.out, ")");
    }
    buf_printf(&c.out, " EXECUTE FUNCTION sluice_trigger_%s()", name);
    free(c.marks);
    return text_of(&c.out);
}

char *pg_sql_schema(const char *sql, char *why, size_t cap)
{
    struct toks ts = {NULL, 0, 0};
    lex(sql, &ts);
    size_t end = trimmed_end(&ts);
    char *out = NULL;
    size_t a = sig(&ts, 0, end), b = a < end ? sig(&ts, a + 1, end) : end;
    size_t c2 = b < end ? sig(&ts, b + 1, end) : end;
    if (a < end && is_word(&ts.t[a], "CREATE") && b < end && is_word(&ts.t[b], "TABLE")) {
        size_t open = b;
        while (open < end && !is_punct(&ts.t[open], '('))
            open++;
        out = open < end ? schema_table(&ts, open, end, why, cap) : NULL;
        if (!out && open >= end)
            snprintf(why, cap, "a table without columns");
    } else if (a < end && is_word(&ts.t[a], "CREATE") && b < end &&
               (is_word(&ts.t[b], "INDEX") || (is_word(&ts.t[b], "UNIQUE") && c2 < end && is_word(&ts.t[c2], "INDEX")))) {
        size_t open = b;
        while (open < end && !is_punct(&ts.t[open], '('))
            open++;
        out = schema_index(&ts, open, end);
    } else if (a < end && is_word(&ts.t[a], "CREATE") && b < end && is_word(&ts.t[b], "TRIGGER")) {
        out = schema_trigger(&ts, end, why, cap);
    } else {
        out = pg_sql_rewrite(sql, NULL);
    }
    free(ts.t);
    return out;
}

char *pg_sql_next(const char **p)
{
    struct toks ts = {NULL, 0, 0};
    lex(*p, &ts);
    int depth = 0;                                  /* inside a trigger's BEGIN ... END */
    int trigger = 0;
    size_t i, first = sig(&ts, 0, ts.n);
    if (first >= ts.n) {
        free(ts.t);
        *p += strlen(*p);
        return NULL;
    }
    for (i = first; i < ts.n; i++) {
        const struct tok *t = &ts.t[i];
        if (is_word(t, "TRIGGER"))
            trigger = 1;
        else if (trigger && (is_word(t, "BEGIN") || (depth > 0 && is_word(t, "CASE"))))
            depth++;                    /* a CASE ... END inside the body is not its END */
        else if (trigger && depth > 0 && is_word(t, "END"))
            depth--;
        else if (depth == 0 && is_punct(t, ';'))
            break;
    }
    const char *start = ts.t[first].p;
    const char *stop = i < ts.n ? ts.t[i].p : *p + strlen(*p);
    *p = i < ts.n ? stop + 1 : stop;
    char *s = strndup(start, (size_t)(stop - start));
    free(ts.t);
    if (!s)
        abort();
    return s;
}
