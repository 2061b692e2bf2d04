/* test_idem_owner.c: is an in-progress Idempotency-Key record's owner still running,
 * when several gateway hosts share the records (fcgi/idem_owner.h, R-IDEM-3, issue 19)? */
#include "check.h"

#include "idem_owner.h"

int main(void)
{
    const char *me = "0a1b2c|gw-a|boot-1";
    CHECK_INT(idem_owner_where(NULL, me), IDEM_OWNER_HERE, "a record from before: written here");
    CHECK_INT(idem_owner_where("", me), IDEM_OWNER_HERE, "empty: the same");
    CHECK_INT(idem_owner_where("0a1b2c|gw-a|boot-1", me), IDEM_OWNER_HERE, "this host, this boot");
    CHECK_INT(idem_owner_where("0a1b2c|gw-a|boot-0", me), IDEM_OWNER_REBOOTED, "this host, an earlier boot");
    CHECK_INT(idem_owner_where("0a1b2c|gw-b|boot-1", me), IDEM_OWNER_ELSEWHERE,
              "another host name on one machine id (a container): elsewhere");
    CHECK_INT(idem_owner_where("ffffff|gw-a|boot-1", me), IDEM_OWNER_ELSEWHERE, "another machine");
    CHECK_INT(idem_owner_where("0a1b2c|gw-a|boot-10", me), IDEM_OWNER_REBOOTED, "a boot id longer than mine");
    CHECK_INT(idem_owner_where("0a1b2c|gw-ab|boot-1", me), IDEM_OWNER_ELSEWHERE, "a name that only starts alike");
    CHECK_INT(idem_owner_where("host-b", "host-a"), IDEM_OWNER_ELSEWHERE, "SLUICE_HOST_ID names");
    CHECK_INT(idem_owner_where("host-a", "host-a"), IDEM_OWNER_HERE, "the same SLUICE_HOST_ID");

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
