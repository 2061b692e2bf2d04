/* test_idem_owner.c: is an in-progress Idempotency-Key record's owner still running,
 * when several gateway hosts share the records (fcgi/idem_owner.h, R-IDEM-3, issue 19)? */
#include "check.h"

#include "idem_owner.h"

int main(void)
{
    const char *me = "0a1b2c|gw-a|pid:[1]|boot-1";
    const int64_t boot = 1000000, before = 999000, after = 1001000;
    CHECK_INT(idem_owner_where(NULL, me, 1, after, boot), IDEM_OWNER_HERE, "a record from before, on a file: here");
    CHECK_INT(idem_owner_where("", me, 1, after, boot), IDEM_OWNER_HERE, "empty: the same");
    CHECK_INT(idem_owner_where(NULL, me, 0, after, boot), IDEM_OWNER_ELSEWHERE,
              "a record from before on a server: any host's (its PID means nothing here)");
    CHECK_INT(idem_owner_where(me, me, 0, after, boot), IDEM_OWNER_HERE, "this host, this boot");
    CHECK_INT(idem_owner_where("0a1b2c|gw-a|pid:[1]|boot-0", me, 0, before, boot), IDEM_OWNER_REBOOTED,
              "this host, a record older than this boot: rebooted");
    CHECK_INT(idem_owner_where("0a1b2c|gw-a|pid:[1]|boot-0", me, 0, after, boot), IDEM_OWNER_ELSEWHERE,
              "all the same but the boot, yet newer than this boot: a clone of this machine, running");
    CHECK_INT(idem_owner_where("0a1b2c|gw-b|pid:[1]|boot-1", me, 0, before, boot), IDEM_OWNER_ELSEWHERE,
              "another host name on one machine id (a container): elsewhere");
    CHECK_INT(idem_owner_where("0a1b2c|gw-a|pid:[9]|boot-1", me, 0, before, boot), IDEM_OWNER_ELSEWHERE,
              "another PID namespace: elsewhere");
    CHECK_INT(idem_owner_where("ffffff|gw-a|pid:[1]|boot-1", me, 0, before, boot), IDEM_OWNER_ELSEWHERE,
              "another machine");
    CHECK_INT(idem_owner_where("0a1b2c|gw-ab|pid:[1]|boot-1", me, 0, before, boot), IDEM_OWNER_ELSEWHERE,
              "a name that only starts alike");
    CHECK_INT(idem_owner_where("id:host-b", "id:host-a", 0, before, boot), IDEM_OWNER_ELSEWHERE,
              "SLUICE_HOST_ID names");
    CHECK_INT(idem_owner_where("id:gw_2", "id:gw_1", 0, before, boot), IDEM_OWNER_ELSEWHERE,
              "SLUICE_HOST_ID names are never \"rebooted\"");
    CHECK_INT(idem_owner_where("id:host-a", "id:host-a", 0, before, boot), IDEM_OWNER_HERE, "the same SLUICE_HOST_ID");

    /* Here the PID check decides; after a reboot nothing of before runs; elsewhere
     * the owner is taken to run until the record expires (never twice). */
    CHECK_INT(idem_owner_running(IDEM_OWNER_HERE, 1, 100, 200), 1, "here, alive (expiry does not matter)");
    CHECK_INT(idem_owner_running(IDEM_OWNER_HERE, 0, 300, 200), 0, "here, dead");
    CHECK_INT(idem_owner_running(IDEM_OWNER_REBOOTED, 1, 300, 200), 0, "rebooted: the same PID is someone else");
    CHECK_INT(idem_owner_running(IDEM_OWNER_ELSEWHERE, 0, 300, 200), 1,
              "elsewhere: this host's PID check says nothing, taken to run");
    CHECK_INT(idem_owner_running(IDEM_OWNER_ELSEWHERE, 0, 200, 200), 0, "elsewhere, expired: no longer");
    return check_done();
}
