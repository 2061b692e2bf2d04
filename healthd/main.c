/* main.c: sluice-healthd: options -> configuration -> lock -> rounds (R-HC-9).
 *
 * cron starts it every minute; a lock beside the database keeps one alive; it
 * works in rounds (5 s) until a minute is up, then exits, so nothing long-lived
 * can leak. --forever keeps it running for operators without cron (make run). */
#include "healthd.h"

#include "conf.h"
#include "db.h"
#include "log.h"
#include "secret.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_POLL_MS 100
#define SLEEP_STEP_MS 50

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

struct options {
    const char *conf_path;
    const char *db, *state, *log;
    int forever;
    int check_config;           /* --check-config: read the configuration, say what is wrong, exit */
    int64_t round_ms, timeout_ms, rounds;   /* 0 = from the configuration / unlimited */
};

static void usage(FILE *f)
{
    fputs("usage: sluice-healthd [-c sluice.conf] [--db PATH] [--state PATH] [--log PATH]\n"
          "                      [--forever] [--round-ms N] [--timeout-ms N] [--rounds N]\n"
          "       sluice-healthd --check-config [-c sluice.conf]\n"
          "  -c FILE        configuration (default $SLUICE_CONF); health.* options apply\n"
          "  --forever      keep going instead of exiting after health.run_seconds (no cron)\n"
          "  --check-config print \"configuration OK\" or the configuration's errors; exit 0 or 1\n"
          "  --rounds N     exit after N rounds\n", f);
}

static int options_parse(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
    o->conf_path = getenv("SLUICE_CONF");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t *num = NULL;
        if (strcmp(a, "--forever") == 0) {
            o->forever = 1;
            continue;
        }
        if (strcmp(a, "--check-config") == 0) {
            o->check_config = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "sluice-healthd: %s needs a value (or is unknown)\n", a);
            return -1;
        }
        if (strcmp(a, "-c") == 0)
            o->conf_path = v;
        else if (strcmp(a, "--db") == 0)
            o->db = v;
        else if (strcmp(a, "--state") == 0)
            o->state = v;
        else if (strcmp(a, "--log") == 0)
            o->log = v;
        else if (strcmp(a, "--round-ms") == 0)
            num = &o->round_ms;
        else if (strcmp(a, "--timeout-ms") == 0)
            num = &o->timeout_ms;
        else if (strcmp(a, "--rounds") == 0)
            num = &o->rounds;
        else {
            fprintf(stderr, "sluice-healthd: unknown option %s\n", a);
            return -1;
        }
        if (num && parse_i64(v, 1, 86400000, num) != 0) {
            fprintf(stderr, "sluice-healthd: %s must be a number from 1 to 86400000\n", a);
            return -1;
        }
        i++;
    }
    return 0;
}

/* Returns the locked descriptor, or -1 when another instance keeps it (or it cannot be opened). */
static int lock_take(const char *db_path, int wait_ms)
{
    char path[600];
    snprintf(path, sizeof path, "%s.healthd-lock", db_path);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_error("lock file %s: %s", path, strerror(errno));
        return -1;
    }
    int64_t until = mono_ms() + wait_ms;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK || mono_ms() >= until || stopping) {
            log_info("another sluice-healthd holds %s; exiting", path);
            close(fd);
            return -1;
        }
        struct timespec ts = {0, LOCK_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return fd;
}

/* The state file may be replaced while healthd runs (`make run` removes it at
 * start): map the file now at the path, not the one seen at start-up. */
static int shm_follow(struct shm *s, const char *path, ino_t *ino)
{
    struct stat st;
    if (s->r && stat(path, &st) == 0 && st.st_ino == *ino)
        return 0;
    if (s->r) {
        munmap(s->r, sizeof *s->r);
        s->r = NULL;
        log_info("state file %s was replaced; mapping the new one", path);
    }
    if (shm_attach(s, path) != 0)
        return -1;
    *ino = stat(path, &st) == 0 ? st.st_ino : 0;
    return 0;
}

static void sleep_until(int64_t when_mono)
{
    for (int64_t now = mono_ms(); now < when_mono && !stopping; now = mono_ms()) {
        int64_t step = when_mono - now < SLEEP_STEP_MS ? when_mono - now : SLEEP_STEP_MS;
        struct timespec ts = {0, (long)step * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int main(int argc, char **argv)
{
    struct options o;
    struct conf conf;
    if (options_parse(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    conf_defaults(&conf);
    if (o.conf_path && conf_load(&conf, o.conf_path) != 0)
        return o.check_config ? 1 : 2;
    if (o.check_config) {
        puts(o.conf_path ? "configuration OK" : "configuration OK (no file: the built-in defaults)");
        return 0;
    }
    if (o.db)
        snprintf(conf.database, sizeof conf.database, "%s", o.db);
    if (o.state)
        snprintf(conf.state_file, sizeof conf.state_file, "%s", o.state);
    if (o.round_ms)
        conf.health_round_ms = (int)o.round_ms;
    if (o.timeout_ms)
        conf.health_timeout_ms = (int)o.timeout_ms;
    secret_use_key_file(conf.secrets_key_file);   /* R-SEC-9 */
    const char *log_path = o.log ? o.log : conf.health_log_file;
    if (log_open(log_path, "sluice-healthd") != 0) {
        fprintf(stderr, "sluice-healthd: cannot open log file %s: %s\n", log_path, strerror(errno));
        return 1;
    }
    log_set_level(log_level_of(conf.log_level));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (!sdb_is_url(conf.database) && access(conf.database, F_OK) != 0) {
        log_error("database %s does not exist (create it with: sluicectl --db PATH init)", conf.database);
        return 1;
    }
    /* One at a time per host (R-HC-9): each host's healthd fills its own state file, so
     * with a database on a server the lock is beside the state file. */
    int lock_fd = lock_take(sdb_is_url(conf.database) ? conf.state_file : conf.database, conf.health_lock_wait_ms);
    if (lock_fd < 0)
        return 0;               /* R-HC-9: one at a time; the running one does the work */
    struct sdb *db = db_open(conf.database, 0);
    struct shm shm = {NULL, -1};
    ino_t ino = 0;
    if (!db || shm_follow(&shm, conf.state_file, &ino) != 0) {
        db_close(db);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    log_info("started: database %s, state %s, %d ms rounds, %d ms timeout%s", conf.database, conf.state_file,
             conf.health_round_ms, conf.health_timeout_ms, o.forever ? ", forever" : "");
    int64_t start = mono_ms(), rounds = 0;
    while (!stopping) {
        int64_t t0 = mono_ms();
        struct round rd = {db, &shm, &conf, now_ms() / conf.health_round_ms};
        round_run(&rd);
        rounds++;
        int64_t next = t0 + conf.health_round_ms;
        if ((o.rounds && rounds >= o.rounds) ||
            (!o.forever && next - start >= (int64_t)conf.health_run_s * 1000))
            break;
        sleep_until(next);
        if (!stopping && shm_follow(&shm, conf.state_file, &ino) != 0)
            break;
    }
    log_info("exiting after %lld rounds", (long long)rounds);
    curl_global_cleanup();
    db_close(db);
    close(lock_fd);
    return 0;
}
