-- 006_credential_origin.sql: who set an endpoint's upstream credential and which URLs it
-- may go to (R-ANT-4, R-SEC-9). A credential the operator set is sent only to replica
-- URLs (and a wake URL) that an operator registered or approved, or that share the
-- origin of a replica an operator approved; admin/ops_endpoint.c keeps that true on
-- every write, so the data plane and healthd send it as before, with no new per-request
-- work (lib/snapshot.c, healthd/record.c and the endpoint test also leave out a URL
-- outside the rule, should one be written behind the API's back).

-- 'operator' or 'tenant' (one of the tenant's admins); NULL when there is no credential.
-- A credential stored before this migration counts as the operator's (the careful
-- choice: tenant admins then need the operator for replicas at new origins).
ALTER TABLE endpoints ADD COLUMN upstream_auth_by TEXT
  CHECK (upstream_auth_by IN ('operator', 'tenant'));
UPDATE endpoints SET upstream_auth_by = 'operator' WHERE upstream_auth IS NOT NULL;

-- 1: registered or approved by an operator (or at the origin of such a replica); 0:
-- registered by a tenant admin. Rows from before this migration keep working (1).
ALTER TABLE endpoints ADD COLUMN wake_url_approved INTEGER NOT NULL DEFAULT 1
  CHECK (wake_url_approved IN (0, 1));
ALTER TABLE replicas ADD COLUMN approved INTEGER NOT NULL DEFAULT 1 CHECK (approved IN (0, 1));

-- The snapshot reads approved: its changes bump config_version too (003's list + approved).
DROP TRIGGER replicas_upd;
CREATE TRIGGER replicas_upd AFTER UPDATE OF endpoint_id, url, engine, weight, max_concurrency,
  state, healthy, node_id, approved ON replicas BEGIN UPDATE config_version SET v = v + 1; END;
