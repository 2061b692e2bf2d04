-- 001_init.sql: the system of record (DESIGN.md "Where state lives").
-- Applied when PRAGMA user_version < 1. Every configuration table bumps
-- config_version through triggers, so responders notice changes without
-- SQL on the hot path (R-CFG-1).

CREATE TABLE config_version (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  v  INTEGER NOT NULL
);
INSERT INTO config_version (id, v) VALUES (1, 1);

CREATE TABLE tenants (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);

CREATE TABLE users (
  id            INTEGER PRIMARY KEY,
  tenant_id     INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  name          TEXT NOT NULL UNIQUE,
  role          TEXT NOT NULL CHECK (role IN ('operator','admin','member')),
  password_hash TEXT,
  created_at    INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);

CREATE TABLE endpoints (
  id                    INTEGER PRIMARY KEY,
  tenant_id             INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  name                  TEXT NOT NULL UNIQUE,
  algorithm             TEXT NOT NULL DEFAULT 'round_robin'
                        CHECK (algorithm IN ('round_robin','random','least_connections','engine_aware')),
  protocol              TEXT NOT NULL DEFAULT 'openai' CHECK (protocol IN ('openai','anthropic')),
  affinity              INTEGER NOT NULL DEFAULT 0,
  key_hash              TEXT UNIQUE,          -- SHA-256 hex of the endpoint key (sk-...)
  key_prefix            TEXT,
  health_path           TEXT NOT NULL DEFAULT '/health',
  connect_timeout_ms    INTEGER NOT NULL DEFAULT 3000,
  first_byte_timeout_ms INTEGER NOT NULL DEFAULT 60000,
  idle_timeout_ms       INTEGER NOT NULL DEFAULT 60000,
  stream_guard          INTEGER NOT NULL DEFAULT 1,
  upstream_auth         TEXT,                 -- upstream credential; never returned (R-ANT-4)
  created_at            INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);

CREATE TABLE replicas (
  id              INTEGER PRIMARY KEY,
  endpoint_id     INTEGER NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  url             TEXT NOT NULL,
  engine          TEXT NOT NULL DEFAULT 'openai'
                  CHECK (engine IN ('vllm','ollama','openai','anthropic','other')),
  weight          INTEGER NOT NULL DEFAULT 1 CHECK (weight >= 0),
  max_concurrency INTEGER NOT NULL DEFAULT 0 CHECK (max_concurrency >= 0),
  state           TEXT NOT NULL DEFAULT 'running' CHECK (state IN ('running','sleeping','disabled')),
  healthy         INTEGER NOT NULL DEFAULT 1,   -- cleared by sluice-healthd (R-HC-2)
  created_at      INTEGER NOT NULL DEFAULT (strftime('%s','now')),
  UNIQUE (endpoint_id, url)
);

CREATE TABLE routes (
  id           INTEGER PRIMARY KEY,
  tenant_id    INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  model        TEXT NOT NULL,
  endpoint_id  INTEGER NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  priority     INTEGER NOT NULL DEFAULT 0,
  weight       INTEGER NOT NULL DEFAULT 1 CHECK (weight >= 0),
  status       TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active','inactive')),
  target_model TEXT,
  created_at   INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);
CREATE INDEX routes_by_tenant_model ON routes (tenant_id, model);

CREATE TABLE api_keys (
  id                  INTEGER PRIMARY KEY,
  user_id             INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  tenant_id           INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  key_hash            TEXT NOT NULL UNIQUE,   -- SHA-256 hex; the clear key is shown once
  prefix              TEXT NOT NULL,          -- first characters, for people to recognise it
  name                TEXT,
  qps_limit           INTEGER NOT NULL DEFAULT 0,
  concurrency_limit   INTEGER NOT NULL DEFAULT 0,
  daily_limit         INTEGER NOT NULL DEFAULT 0,
  monthly_quota       INTEGER NOT NULL DEFAULT 0,
  tpm_limit           INTEGER NOT NULL DEFAULT 0,
  monthly_token_quota INTEGER NOT NULL DEFAULT 0,
  revoked_at          INTEGER,
  created_at          INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);

CREATE TABLE settings (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

-- R-USE-3: one event per request.
CREATE TABLE usage_events (
  id                INTEGER PRIMARY KEY,
  ts_ms             INTEGER NOT NULL,
  request_id        TEXT NOT NULL,
  tenant_id         INTEGER NOT NULL DEFAULT 0,
  user_id           INTEGER NOT NULL DEFAULT 0,
  key_id            INTEGER NOT NULL DEFAULT 0,
  endpoint_id       INTEGER NOT NULL DEFAULT 0,
  replica_id        INTEGER NOT NULL DEFAULT 0,
  route_id          INTEGER NOT NULL DEFAULT 0,
  model             TEXT NOT NULL DEFAULT '',
  routed_model      TEXT NOT NULL DEFAULT '',
  path              TEXT NOT NULL DEFAULT '',
  prompt_tokens     INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0,
  latency_ms        INTEGER NOT NULL DEFAULT 0,
  ttft_ms           INTEGER NOT NULL DEFAULT 0,
  status            INTEGER NOT NULL,
  error_code        TEXT,
  finish_reason     TEXT,
  retries           INTEGER NOT NULL DEFAULT 0,
  stream            INTEGER NOT NULL DEFAULT 0,
  cached            INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX usage_events_by_tenant_ts ON usage_events (tenant_id, ts_ms);
CREATE INDEX usage_events_by_key_ts ON usage_events (key_id, ts_ms);
CREATE INDEX usage_events_by_request ON usage_events (request_id);

-- R-USE-3: per-day aggregate, same transaction as the events. 0 means "none".
CREATE TABLE usage_daily (
  day               TEXT NOT NULL,      -- YYYY-MM-DD in the billing time zone
  tenant_id         INTEGER NOT NULL,
  user_id           INTEGER NOT NULL,
  key_id            INTEGER NOT NULL,
  model             TEXT NOT NULL,
  requests          INTEGER NOT NULL DEFAULT 0,
  errors            INTEGER NOT NULL DEFAULT 0,
  prompt_tokens     INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (day, tenant_id, user_id, key_id, model)
) WITHOUT ROWID;

-- Configuration tables bump config_version (R-CFG-1).
CREATE TRIGGER tenants_ins AFTER INSERT ON tenants BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER tenants_upd AFTER UPDATE ON tenants BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER tenants_del AFTER DELETE ON tenants BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER users_ins AFTER INSERT ON users BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER users_upd AFTER UPDATE ON users BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER users_del AFTER DELETE ON users BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER endpoints_ins AFTER INSERT ON endpoints BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER endpoints_upd AFTER UPDATE ON endpoints BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER endpoints_del AFTER DELETE ON endpoints BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER replicas_ins AFTER INSERT ON replicas BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER replicas_upd AFTER UPDATE ON replicas BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER replicas_del AFTER DELETE ON replicas BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER routes_ins AFTER INSERT ON routes BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER routes_upd AFTER UPDATE ON routes BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER routes_del AFTER DELETE ON routes BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER api_keys_ins AFTER INSERT ON api_keys BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER api_keys_upd AFTER UPDATE ON api_keys BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER api_keys_del AFTER DELETE ON api_keys BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER settings_ins AFTER INSERT ON settings BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER settings_upd AFTER UPDATE ON settings BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER settings_del AFTER DELETE ON settings BEGIN UPDATE config_version SET v = v + 1; END;
