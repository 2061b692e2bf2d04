/* passive_share.c: a replica's bans and circuits, the same on every gateway host. */
#include "passive_share.h"

#include "log.h"
#include "redis_bus.h"
#include "snapshot.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static struct shm *share_shm;      /* set once at start */
static int sharing;
static char me[24];                /* this process on the channel: its own news are not news */

/* "v1 SENDER REPLICA NEWS": another host's news, applied to this host's shared state. */
static void on_message(const char *msg, size_t n, void *arg)
{
    (void)arg;
    char line[256], sender[sizeof me];
    long long id;
    int off = 0;
    if (n >= sizeof line)
        return;
    memcpy(line, msg, n);
    line[n] = 0;
    struct passive_news news;
    if (sscanf(line, "v1 %23s %lld %n", sender, &id, &off) != 2 || !off || strcmp(sender, me) == 0 ||
        passive_news_parse(line + off, &news) != 0)
        return;
    /* The snapshot is held until the news is in: its slot is the replica's while it is. */
    struct snapshot *s = snapshot_acquire();
    int slot = -1;
    for (int i = 0; s && i < s->n_replicas && slot < 0; i++)
        if (s->replicas[i].id == id)
            slot = s->replicas[i].slot;
    if (slot >= 0 && shm_lock(share_shm) == 0) {
        struct passive_state ps;
        passive_load(share_shm, slot, &ps);
        if (passive_on_news(&ps, &news, now_ms()))
            passive_store(share_shm, slot, &ps);
        shm_unlock(share_shm);
    }
    if (s)
        snapshot_release(s);
}

int passive_share_start(const char *state, struct shm *shm)
{
    if (!state || !*state)
        return 0;
    share_shm = shm;
    uint32_t r;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint32_t)now_ms();
    snprintf(me, sizeof me, "%d.%08x", (int)getpid(), r);
    if (redis_bus_listen(on_message, NULL) != 0 || redis_bus_start(state) != 0)
        return -1;
    sharing = 1;
    return 0;
}

void passive_share_tell(int64_t replica_id, const struct passive_state *ps, int failed, int timeout_ms)
{
    if (!sharing)
        return;
    struct passive_news news;
    passive_news_of(ps, failed, now_ms(), &news);
    char body[160], line[220];
    if (!passive_news_format(&news, body, sizeof body))
        return;
    int n = snprintf(line, sizeof line, "v1 %s %lld %s", me, (long long)replica_id, body);
    if (n > 0 && (size_t)n < sizeof line)
        redis_bus_publish(line, (size_t)n, timeout_ms);
}
