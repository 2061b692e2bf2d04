/* supervise.c: sluice-fcgi --listen, the supervisor of its own responders
 * (supervise.h). One process, no threads: it waits for signals only. */
#include "supervise.h"

#include "log.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCESSES 64
#define LISTEN_BACKLOG 1024
#define QUICK_DEATH_MS 10000     /* a responder that ran less than this died "quickly" */

int listen_parse(const char *s, struct listen_addr *a, const char **why)
{
    memset(a, 0, sizeof *a);
    *why = "expected unix:PATH or 127.0.0.1:PORT";
    if (!s || !*s)
        return -1;
    if (strncmp(s, "unix:", 5) == 0) {
        const char *p = s + 5;
        if (*p != '/') {
            *why = "a unix socket path must be absolute";
            return -1;
        }
        if (strlen(p) >= sizeof a->path) {
            *why = "the unix socket path is too long (at most 107 bytes)";
            return -1;
        }
        a->unix_socket = 1;
        memcpy(a->path, p, strlen(p) + 1);
        return 0;
    }
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof a->host)
        return -1;
    memcpy(a->host, s, (size_t)(colon - s));
    a->host[colon - s] = '\0';
    const char *p = colon + 1;
    long port = 0;
    if (!*p || strlen(p) > 5)
        return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        port = port * 10 + (*p - '0');
    }
    if (port < 1 || port > 65535) {
        *why = "the port must be 1-65535";
        return -1;
    }
    struct in_addr in;
    if (inet_pton(AF_INET, a->host, &in) != 1) {
        *why = "the host must be an IPv4 address such as 127.0.0.1";
        return -1;
    }
    /* FastCGI carries the caller's headers and the front's say on who the
     * client is, unauthenticated: only this machine may connect. */
    if ((ntohl(in.s_addr) >> 24) != 127) {
        *why = "FastCGI has no authentication: listen on a loopback address (127.x.x.x) or a unix socket";
        return -1;
    }
    a->port = (int)port;
    return 0;
}

int64_t respawn_delay_ms(int64_t ran_ms, int quick_deaths)
{
    if (ran_ms >= QUICK_DEATH_MS || quick_deaths <= 0)
        return 0;
    int64_t d = 100;
    for (int i = 1; i < quick_deaths && d < 10000; i++)
        d *= 2;
    return d < 10000 ? d : 10000;
}

/* A unix socket left by a supervisor that died is removed; one that answers is
 * another sluice's, and stays. */
static int unix_listener(const struct listen_addr *a, struct stat *made)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, a->path, strlen(a->path) + 1);
    /* Only a socket is ever replaced: a mistyped path must not delete a file. */
    struct stat st;
    if (lstat(a->path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
        log_error("--listen unix:%s: the path exists and is not a socket", a->path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        log_error("--listen unix:%s: another process is serving on it", a->path);
        close(fd);
        return -1;
    }
    if (errno == ECONNREFUSED)
        unlink(a->path);
    close(fd);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* 0660: the front server's user reaches it through the group. */
    mode_t old = umask(0117);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc != 0 || lstat(a->path, made) != 0) {
        log_error("--listen unix:%s: %s", a->path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int tcp_listener(const struct listen_addr *a)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)a->port)};
    inet_pton(AF_INET, a->host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        log_error("--listen %s:%d: %s", a->host, a->port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* The second fork leaves a process that is no session leader and so can never
 * take a terminal again. The working directory stays: paths of a configuration
 * file are absolute by now, and a run without one means the current folder. */
static int detach(void)
{
    pid_t p = fork();
    if (p < 0)
        return -1;
    if (p > 0)
        _exit(0);
    if (setsid() < 0)
        return -1;
    p = fork();
    if (p < 0)
        return -1;
    if (p > 0)
        _exit(0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2)
            close(null);
    }
    return 0;
}

struct child {
    pid_t pid;                  /* 0: not running */
    int64_t started_ms, due_ms; /* when it started; when to start it again */
    int quick;                  /* quick deaths in a row */
};

static void signal_all(const struct child *k, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (k[i].pid > 0)
            kill(k[i].pid, sig);
}

static int running(const struct child *k, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        m += k[i].pid > 0;
    return m;
}

/* Collects every child that ended; schedules its next start unless stopping. */
static void reap(struct child *k, int n, int stopping)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (int i = 0; i < n; i++) {
            if (k[i].pid != pid)
                continue;
            int64_t now = mono_ms(), ran = now - k[i].started_ms;
            k[i].pid = 0;
            if (stopping) {
                log_info("responder %d ended (%s %d)", (int)pid, WIFSIGNALED(st) ? "signal" : "status",
                         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
                break;
            }
            k[i].quick = ran < QUICK_DEATH_MS ? k[i].quick + 1 : 0;
            k[i].due_ms = now + respawn_delay_ms(ran, k[i].quick);
            log_warn("responder %d died (%s %d) after %lld ms; starting another in %lld ms", (int)pid,
                     WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
                     (long long)ran, (long long)(k[i].due_ms - now));
            break;
        }
    }
}

int supervise(const struct supervise_opts *o, const sigset_t *blocked)
{
    struct listen_addr a;
    const char *why;
    if (listen_parse(o->listen, &a, &why) != 0) {
        fprintf(stderr, "sluice-fcgi: --listen %s: %s\n", o->listen, why);
        return -1;
    }
    if (o->processes < 1 || o->processes > MAX_PROCESSES) {
        fprintf(stderr, "sluice-fcgi: --processes must be 1-%d\n", MAX_PROCESSES);
        return -1;
    }
    struct stat made;
    int lfd = a.unix_socket ? unix_listener(&a, &made) : tcp_listener(&a);
    if (lfd < 0 || listen(lfd, LISTEN_BACKLOG) != 0) {
        fprintf(stderr, "sluice-fcgi: cannot listen on %s (the reason is in the log)\n", o->listen);
        if (lfd >= 0)
            close(lfd);
        return -1;
    }
    if (o->daemon && detach() != 0) {
        log_error("--daemon: %s", strerror(errno));
        return -1;
    }
    if (o->pid_file) {
        FILE *f = fopen(o->pid_file, "w");
        if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
            log_error("--pid-file %s: %s", o->pid_file, strerror(errno));
            return -1;
        }
    }
    sigset_t set = *blocked;
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    struct child k[MAX_PROCESSES];
    memset(k, 0, sizeof k);
    int n = o->processes, stopping = 0;
    log_info("sluice-fcgi supervisor %d: listening on %s, %d responders", (int)getpid(), o->listen, n);
    for (;;) {
        int64_t now = mono_ms(), next = -1;
        for (int i = 0; i < n && !stopping; i++) {
            if (k[i].pid > 0)
                continue;
            if (k[i].due_ms > now) {
                next = next < 0 || k[i].due_ms < next ? k[i].due_ms : next;
                continue;
            }
            pid_t self = getpid(), pid = fork();
            if (pid == 0) {
                /* A responder: the socket on fd 0, as lighttpd's bin-path hands it.
                 * It ends with the supervisor: orphans would keep the socket busy. */
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (getppid() != self)
                    _exit(0);
                sigprocmask(SIG_SETMASK, blocked, NULL);
                if (dup2(lfd, 0) < 0)
                    _exit(1);
                close(lfd);
                return 0;
            }
            if (pid < 0) {
                log_error("fork: %s; trying again in 1 s", strerror(errno));
                k[i].due_ms = now + 1000;
                continue;
            }
            k[i].pid = pid;
            k[i].started_ms = now;
        }
        if (stopping && running(k, n) == 0)
            break;
        struct timespec wait = {1, 0};
        if (next >= 0 && next - now < 1000)
            wait = (struct timespec){0, (long)(next - now) * 1000000L};
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &wait);
        if (sig == SIGCHLD || sig < 0) {
            reap(k, n, stopping);
        } else if (sig == SIGHUP) {
            /* Re-read here too: a responder started after this has the new values. */
            if (o->on_hup)
                o->on_hup();
            log_info("SIGHUP: passed on to %d responders", running(k, n));
            signal_all(k, n, SIGHUP);
        } else if (sig == SIGTERM || sig == SIGINT) {
            if (!stopping) {
                log_info("signal %d: stopping %d responders (each drains its requests)", sig, running(k, n));
                stopping = 1;
                signal_all(k, n, SIGTERM);
            } else {
                log_warn("signal %d again: killing %d responders", sig, running(k, n));
                signal_all(k, n, SIGKILL);
            }
        }
    }
    close(lfd);
    struct stat now;        /* our socket, not one a later supervisor made there */
    if (a.unix_socket && lstat(a.path, &now) == 0 && now.st_ino == made.st_ino && now.st_dev == made.st_dev)
        unlink(a.path);
    if (o->pid_file)
        unlink(o->pid_file);
    log_info("sluice-fcgi supervisor %d: stopped", (int)getpid());
    exit(0);
}
