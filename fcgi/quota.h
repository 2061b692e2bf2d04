/* quota.h: call and token quotas counted by atomic UPSERT in SQLite (R-KEY-4, R-KEY-5).
 * Calls run inside a transaction the caller opens, so a refusal by a later
 * check rolls back the earlier counts (the paired-bucket refund). */
#ifndef SLUICE_QUOTA_H
#define SLUICE_QUOTA_H

#include "dbpool.h"

#include <stdint.h>

enum quota_result { QUOTA_OK = 0, QUOTA_REFUSED = 1, QUOTA_DB_ERROR = -1 };

/* Counts one call in period ('d:YYYY-MM-DD' or 'm:YYYY-MM') unless it already
 * holds `limit`; *current gets the count after (or at) the check. */
enum quota_result quota_take_call(struct dbconn *c, int64_t key_id, const char *period, int64_t limit,
                                  int64_t *current);
/* Pre-deducts `want` tokens (capped at the quota) unless the period's tokens
 * already reached `limit`. */
enum quota_result quota_take_tokens(struct dbconn *c, int64_t key_id, const char *period, int64_t want,
                                    int64_t limit, int64_t *current);
/* Settlement: adds delta (negative = refund) to the period's tokens. */
int quota_settle_tokens(struct dbconn *c, int64_t key_id, const char *period, int64_t delta);

/* "d:YYYY-MM-DD" / "m:YYYY-MM" for epoch ms in the billing time zone. */
void quota_day_period(int64_t ms, char out[16]);
void quota_month_period(int64_t ms, char out[16]);

#endif
