/* test_conf.c: sluice.conf against its schema (lib/conf.c, R-DEP-5): every option of the
 * shipped sample is known; unknown options and groups, wrong types and out-of-range values
 * are refused with file:line naming the option (and a likely spelling); nothing of a
 * refused file is kept; relative paths are read against the file's folder. */
#include "check.h"

#include "conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/test_conf.XXXXXX";
static char errors[8192];

/* Writes text to dir/name and loads it over the defaults; errors[] holds what it printed. */
static int load(struct conf *c, const char *name, const char *text)
{
    char path[256], err_path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    fflush(stderr);
    int saved = dup(2);
    FILE *e = freopen(err_path, "w", stderr);
    conf_defaults(c);
    int rc = conf_load(c, path);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    (void)e;
    f = fopen(err_path, "r");
    size_t n = f ? fread(errors, 1, sizeof errors - 1, f) : 0;
    errors[n] = '\0';
    if (f)
        fclose(f);
    return rc;
}

static int said(const char *what)
{
    return strstr(errors, what) != NULL;
}

/* The shipped sample with its placeholders filled: every option known, no message. */
static void test_sample(const char *srcdir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/conf/sluice.conf.in", srcdir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot read %s", path);
    if (!f)
        return;
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    static char out[65536];
    size_t o = 0;
    for (const char *p = text; *p && o < sizeof out - 64;) {
        if (strncmp(p, "@STATE_DIR@", 11) == 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "/var/lib/sluice");
            p += 11;
        } else if (*p == '@') {         /* @PROCS@, @THREADS@, @KEEPALIVE_MS@ */
            const char *end = strchr(p + 1, '@');
            const char *v = strncmp(p, "@PROCS@", 7) == 0 ? "2" : strncmp(p, "@THREADS@", 9) == 0 ? "16" : "5000";
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", v);
            p = end ? end + 1 : p + 1;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    struct conf c;
    CHECK_INT(load(&c, "sample.conf", out), 0, "the shipped sample loads");
    CHECK(errors[0] == '\0', "the sample said: %s", errors);
    CHECK_STR(c.database, "/var/lib/sluice/sluice.db", "sample database");
}

/* conf_reload's report of a changed `state`: what main() logs on SIGHUP. */
static char state_was[600], state_now[600];
static int on_change(void *arg, const char *name, const char *was, const char *now, enum conf_change how,
                     const void *value)
{
    if (strcmp(name, "state") == 0) {
        snprintf(state_was, sizeof state_was, "%s", was);
        snprintf(state_now, sizeof state_now, "%s", now);
    }
    return 0;
}

static void test_state_reload_hides_password(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/hup.conf", dir);
    FILE *f = fopen(path, "w");
    fputs("state = \"redis://:first-secret@r1:6379/0\";\n", f);
    fclose(f);
    struct conf live, file;
    conf_defaults(&live);
    CHECK_INT(conf_load(&live, path), 0, "hup.conf loads");
    file = live;
    f = fopen(path, "w");
    fputs("state = \"redis://:second-secret@r2:6380/1\";\n", f);
    fclose(f);
    CHECK_INT(conf_reload(&live, &file, path, on_change, NULL), 0, "reload");
    CHECK(strcmp(state_was, "\"redis://r1:6379/0\"") == 0, "old state described as %s", state_was);
    CHECK(strcmp(state_now, "\"redis://r2:6380/1\"") == 0, "new state described as %s", state_now);
    CHECK(!strstr(state_was, "secret") && !strstr(state_now, "secret"), "a password in %s / %s", state_was, state_now);
    CHECK(strstr(live.state, "first-secret") != NULL, "state needs a restart: the old value holds");
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const char *src = getenv("SLUICE_SRCDIR");
    test_sample(src && *src ? src : ".");
    test_state_reload_hides_password();

    struct conf c, def;
    conf_defaults(&def);

    /* values apply; a relative path is read against the file's folder */
    CHECK_INT(load(&c, "ok.conf",
                   "database = \"db/sluice.db\";\nstate_file = \"/run/s.state\";\nlog_file = \"-\";\n"
                   "access_log = \"\";\npool: { threads = 8; };\nmetrics: { tenant_labels = false; };\n"
                   "limits: { max_body_bytes = 4096; };\nlog_level = \"debug\";\n"),
              0, "a good file loads");
    char want[300];
    snprintf(want, sizeof want, "%s/db/sluice.db", dir);
    CHECK_STR(c.database, want, "relative database beside the file");
    CHECK_STR(c.state_file, "/run/s.state", "absolute path unchanged");
    CHECK_STR(c.log_file, "-", "'-' is stderr, not a file");
    CHECK_STR(c.access_log, "", "'' is off, not a file");
    CHECK_INT(c.pool_threads, 8, "pool.threads");
    CHECK_STR(c.log_level, "debug", "log_level");
    CHECK_INT(c.metrics_tenant_labels, 0, "metrics.tenant_labels");
    CHECK_INT((int)c.max_body_bytes, 4096, "limits.max_body_bytes (int64)");
    CHECK(errors[0] == '\0', "a good file said: %s", errors);

    /* issue 19: state names a Redis (kept as written: a URL, not a path), or is empty */
    CHECK_INT(load(&c, "redis.conf", "state = \"redis+unix:///run/redis.sock?db=2\";\n"), 0, "a Redis state");
    CHECK_STR(c.state, "redis+unix:///run/redis.sock?db=2", "state kept as written");
    CHECK_INT(load(&c, "nostate.conf", "state = \"\";\n"), 0, "an empty state");
    CHECK_STR(c.state, "", "empty: the state file");

    /* a default path (no database, no state_file in the file) lies beside the file too,
     * whatever the working directory */
    CHECK_INT(load(&c, "bare.conf", "pool: { threads = 4; };\n"), 0, "a file without paths");
    snprintf(want, sizeof want, "%s/sluice.db", dir);
    CHECK_STR(c.database, want, "default database beside the file");
    snprintf(want, sizeof want, "%s/sluice.state", dir);
    CHECK_STR(c.state_file, want, "default state file beside the file");
    CHECK_STR(c.log_file, "-", "default log stays standard error");
    CHECK_STR(c.secrets_key_file, "", "default key file stays 'beside the database'");

    /* each mistake is named with its line; the whole file is refused */
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"pool: { threads = \"many\"; };\n", "bad.conf:1: pool.threads must be an integer, not a string"},
        {"\n\npassive: { ban_msx = 2000; };\n", "bad.conf:3: unknown option passive.ban_msx (did you mean passive.ban_ms?)"},
        {"limits: { max_body_bytes = 12; };\n", "bad.conf:1: limits.max_body_bytes = 12 is outside 1024..4294967296"},
        {"metrics: { tenant_labels = 1; };\n", "metrics.tenant_labels must be true or false, not an integer"},
        {"colour = \"blue\";\n", "bad.conf:1: unknown option colour"},
        {"stream: { keepalive_ms = 2.5; };\n", "stream.keepalive_ms must be an integer, not a number with a fraction"},
        {"pol: { processes = 2; };\n", "unknown group pol (did you mean pool?)"},
        {"database = 5;\n", "database must be a string (in double quotes), not an integer"},
        {"pool = 4;\n", "unknown option pool"},
        {"pool: { threads = 8; extra: { x = 1; }; };\n", "unknown group pool.extra"},
        {"databse = \"x.db\";\n", "unknown option databse (did you mean database?)"},
        {"log_level = \"verbose\";\n", "log_level must be one of \"error\", \"warn\", \"info\", \"debug\""},
        {"log_level = 3;\n", "log_level must be one of"},
        {"\nstate = \"http://r:6379\";\n", "bad.conf:2: state: must start with redis:// or redis+unix://"},
        {"state = \"redis://r:99999/0\";\n", "bad.conf:1: state: the port must be a number from 1 to 65535"},
        {"pool: { threads = 8 \n", "bad.conf:"},                                   /* a syntax error */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_INT(load(&c, "bad.conf", bad[i].text), -1, bad[i].text);
        CHECK(said(bad[i].want), "case %zu: wanted \"%s\", got: %s", i, bad[i].want, errors);
        CHECK(said("FATAL CONFIG FILE ERROR: "), "case %zu: the message's prefix: %s", i, errors);
    }

    /* several mistakes: each named; nothing of the file kept (not even its good lines) */
    CHECK_INT(load(&c, "two.conf", "pool: { threads = 9; processes = 0; };\ncolor = 1;\n"), -1, "two mistakes");
    CHECK(said("two.conf:1: pool.processes = 0 is outside 1..64") && said("two.conf:2: unknown option color"),
          "both named: %s", errors);
    CHECK_INT(c.pool_threads, def.pool_threads, "a refused file changes nothing");

    /* a path too long for its field is refused, not cut */
    char longpath[1200] = "database = \"/";
    memset(longpath + 13, 'a', 600);
    strcpy(longpath + 613, "\";\n");
    CHECK_INT(load(&c, "long.conf", longpath), -1, "a path longer than the field");
    CHECK(said("database is too long"), "too long: %s", errors);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done();
}
