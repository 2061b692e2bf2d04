-- 016_idem_owner_host.sql: the host of an in-progress idempotency record's owner
-- (issue 19). owner_pid and owner_start say whether the owner still runs only on
-- the host that wrote them: on another gateway host that PID is some other
-- process, or none. NULL: a record from before, written on this host.
ALTER TABLE idempotency ADD COLUMN owner_host TEXT;
