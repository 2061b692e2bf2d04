-- 012_page_api.sql: the management page's Requests view and reports (issue 16, R-ADM-3).
-- R-AFF-5, R-CACHE-2: what the request's affinity lookup and response cache did, as the
-- response headers said: 'hit' | 'miss'; NULL when it did not apply (or older events).
ALTER TABLE usage_events ADD COLUMN affinity TEXT;
ALTER TABLE usage_events ADD COLUMN cache TEXT;
-- GET /api/v1/requests lists newest first by (ts_ms, id) and pages by that pair, so each
-- filter has an index ending in ts_ms (every index also ends in the rowid): a page reads
-- its rows and stops. tenant_id, user_id, key_id and plain time already have one (001, 004,
-- 009). Status classes (2xx) and exact statuses share the class index; error codes are
-- few and most events have none, so that index holds only the failures.
CREATE INDEX usage_events_by_class_ts ON usage_events (status / 100, ts_ms);
CREATE INDEX usage_events_by_code_ts ON usage_events (error_code, ts_ms) WHERE error_code IS NOT NULL;
CREATE INDEX usage_events_by_model_ts ON usage_events (model, ts_ms);
CREATE INDEX usage_events_by_routed_ts ON usage_events (routed_model, ts_ms);
CREATE INDEX usage_events_by_endpoint_ts ON usage_events (endpoint_id, ts_ms);
