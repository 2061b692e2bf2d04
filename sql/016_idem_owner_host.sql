-- 016_idem_owner_host.sql: who owns an in-progress idempotency record (issue 19).
-- owner_pid and owner_start say whether the owner still runs only on the host
-- that wrote them (owner_host): on another gateway host that PID is some other
-- process, or none. owner_token is the claim's own random id: the end of a request
-- (done, or released) changes the record only while it is still that claim's. NULL:
-- a record from before, written on this host.
ALTER TABLE idempotency ADD COLUMN owner_host TEXT;
ALTER TABLE idempotency ADD COLUMN owner_token TEXT;
