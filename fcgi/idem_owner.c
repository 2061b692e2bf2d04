/* idem_owner.c: where the owner of an in-progress idempotency record runs; see idem_owner.h. */
#include "idem_owner.h"

#include <string.h>

enum idem_owner_at idem_owner_where(const char *owner, const char *me, int null_is_here, int64_t created_ms,
                                    int64_t boot_ms)
{
    if (!owner || !*owner)
        return null_is_here ? IDEM_OWNER_HERE : IDEM_OWNER_ELSEWHERE;
    if (strcmp(owner, me) == 0)
        return IDEM_OWNER_HERE;
    /* All the same but the boot: this host before it rebooted, if the record is
     * older than this boot (else another machine cloned from the same image). */
    const char *ob = strrchr(owner, '|'), *mb = strrchr(me, '|');
    if (ob && mb && ob - owner == mb - me && strncmp(owner, me, (size_t)(ob - owner)) == 0 && created_ms < boot_ms)
        return IDEM_OWNER_REBOOTED;
    return IDEM_OWNER_ELSEWHERE;
}

int idem_owner_running(enum idem_owner_at where, int alive_here, int64_t expires_at, int64_t now)
{
    switch (where) {
    case IDEM_OWNER_HERE:
        return alive_here;
    case IDEM_OWNER_REBOOTED:
        return 0;
    case IDEM_OWNER_ELSEWHERE:
        /* Nothing here can tell whether it still runs: it is taken to until its
         * record expires, so a request never runs twice (its retry waits). */
        return now < expires_at;
    }
    return 1;
}
