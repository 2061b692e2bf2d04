-- 009_queueing.sql: capacity caps, the wait queue, priorities and quota layers
-- (R-PRIO-1..2, R-KEY-6).
-- R-PRIO-1: an endpoint's cap over all its replicas (0 = none; replicas keep their own
-- max_concurrency), and the bounds of its wait queue.
ALTER TABLE endpoints ADD COLUMN max_concurrency INTEGER NOT NULL DEFAULT 0 CHECK (max_concurrency >= 0);
ALTER TABLE endpoints ADD COLUMN queue_max INTEGER NOT NULL DEFAULT 100 CHECK (queue_max >= 0);
ALTER TABLE endpoints ADD COLUMN queue_timeout_ms INTEGER NOT NULL DEFAULT 10000 CHECK (queue_timeout_ms >= 0);
-- R-PRIO-2: 0 is the highest. max_priority NULL: the key may not ask above its own priority.
ALTER TABLE api_keys ADD COLUMN priority INTEGER NOT NULL DEFAULT 5 CHECK (priority BETWEEN 0 AND 9);
ALTER TABLE api_keys ADD COLUMN max_priority INTEGER CHECK (max_priority BETWEEN 0 AND 9);
ALTER TABLE tenants ADD COLUMN weight INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000);
-- R-KEY-6: a refusal for the tenant's or user's tokens may shrink max_tokens instead.
ALTER TABLE model_policies ADD COLUMN shrink_max_tokens INTEGER NOT NULL DEFAULT 0;
-- R-PRIO-1: time a request waited in the queue.
ALTER TABLE usage_events ADD COLUMN queue_ms INTEGER NOT NULL DEFAULT 0;

-- R-KEY-6: one quota layer row. Exactly one of tenant_id / user_id / endpoint_id / model
-- names what it limits (scope says which); 0 = no limit in that column.
CREATE TABLE quotas (
  id             INTEGER PRIMARY KEY,
  scope          TEXT NOT NULL CHECK (scope IN ('tenant','user','endpoint','model')),
  tenant_id      INTEGER REFERENCES tenants(id) ON DELETE CASCADE,
  user_id        INTEGER REFERENCES users(id) ON DELETE CASCADE,
  endpoint_id    INTEGER REFERENCES endpoints(id) ON DELETE CASCADE,
  model          TEXT,
  concurrency    INTEGER NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
  rpm            INTEGER NOT NULL DEFAULT 0 CHECK (rpm >= 0),
  daily_tokens   INTEGER NOT NULL DEFAULT 0 CHECK (daily_tokens >= 0),
  monthly_tokens INTEGER NOT NULL DEFAULT 0 CHECK (monthly_tokens >= 0),
  queue_max      INTEGER CHECK (queue_max >= 0),      -- model scope: its queue length; NULL = the endpoint's
  updated_at     INTEGER NOT NULL DEFAULT (strftime('%s','now')),
  CHECK ((scope = 'tenant') = (tenant_id IS NOT NULL) AND (scope = 'user') = (user_id IS NOT NULL) AND
         (scope = 'endpoint') = (endpoint_id IS NOT NULL) AND (scope = 'model') = (model IS NOT NULL))
);
CREATE UNIQUE INDEX quotas_by_target ON quotas (scope, COALESCE(tenant_id, 0), COALESCE(user_id, 0),
                                                COALESCE(endpoint_id, 0), COALESCE(model, ''));
CREATE TRIGGER quotas_ins AFTER INSERT ON quotas BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER quotas_upd AFTER UPDATE ON quotas BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER quotas_del AFTER DELETE ON quotas BEGIN UPDATE config_version SET v = v + 1; END;
-- R-KEY-6: the users' daily and the tenants' monthly tokens are rebuilt from the events
-- when the shared state first sees a period.
CREATE INDEX usage_events_by_user_ts ON usage_events (user_id, ts_ms);
