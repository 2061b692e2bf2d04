-- 012_page_api.sql: the management page's Requests view and reports (issue 16, R-ADM-3).
-- R-AFF-5, R-CACHE-2: what the request's affinity lookup and response cache did, as the
-- response headers said: 'hit' | 'miss'; NULL when it did not apply (or older events).
ALTER TABLE usage_events ADD COLUMN affinity TEXT;
ALTER TABLE usage_events ADD COLUMN cache TEXT;
-- GET /api/v1/requests lists newest first by (ts_ms, id) and pages by that pair, so each
-- filter has an index ending in ts_ms (every index also ends in the rowid): a page reads
-- its rows and stops. tenant_id, user_id, key_id and plain time already have one (001, 004,
-- 009). Every event costs the usage writer an insert into each full index, so the filters
-- that single out rare events index only those: statuses other than 200 (200, and 2xx,
-- are most events and are read along the time index), error codes (failures only), and
-- the routed model where it differs from the asked one (the model index covers the rest).
-- A status class (5xx) has an index of its own: a range over exact statuses would need
-- every match sorted by time.
CREATE INDEX usage_events_by_status_ts ON usage_events (status, ts_ms) WHERE status <> 200;
CREATE INDEX usage_events_by_class_ts ON usage_events (status / 100, ts_ms) WHERE status <> 200;
CREATE INDEX usage_events_by_code_ts ON usage_events (error_code, ts_ms) WHERE error_code IS NOT NULL;
CREATE INDEX usage_events_by_model_ts ON usage_events (model, ts_ms);
CREATE INDEX usage_events_by_routed_ts ON usage_events (routed_model, ts_ms) WHERE routed_model <> model;
CREATE INDEX usage_events_by_endpoint_ts ON usage_events (endpoint_id, ts_ms);
-- The usage report by endpoint and by replica (R-USE-6/7 for issue 16): a second daily
-- aggregate beside usage_daily, written by the usage writer in the same transaction as
-- the events. model stays in the key so the report prices each model's tokens.
CREATE TABLE usage_daily_route (
  day               TEXT NOT NULL,      -- YYYY-MM-DD in the billing time zone
  tenant_id         INTEGER NOT NULL,
  user_id           INTEGER NOT NULL,
  endpoint_id       INTEGER NOT NULL,   -- 0: refused before an endpoint was chosen
  replica_id        INTEGER NOT NULL,
  model             TEXT NOT NULL,
  requests          INTEGER NOT NULL DEFAULT 0,
  errors            INTEGER NOT NULL DEFAULT 0,
  prompt_tokens     INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (day, tenant_id, user_id, endpoint_id, replica_id, model)
) WITHOUT ROWID;
CREATE INDEX usage_daily_route_by_tenant ON usage_daily_route (tenant_id, day);
CREATE INDEX usage_daily_route_by_user ON usage_daily_route (user_id, day);
-- Events from before this migration: their day in the time zone of the process that
-- migrates (the data plane and the admin CGI run in billing_tz).
INSERT INTO usage_daily_route (day, tenant_id, user_id, endpoint_id, replica_id, model, requests, errors,
                               prompt_tokens, completion_tokens)
  SELECT date(ts_ms / 1000, 'unixepoch', 'localtime'), tenant_id, user_id, endpoint_id, replica_id, model,
         COUNT(*), SUM(status >= 400), SUM(prompt_tokens), SUM(completion_tokens)
  FROM usage_events GROUP BY 1, 2, 3, 4, 5, 6;
