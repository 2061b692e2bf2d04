-- 002_governance_health_admin.sql: tables for key governance and idempotency
-- (SPEC §12-13), health and nodes (§8-9), management sessions, audit and alerts (§20).

-- GPU hosts (R-HC-7, R-WAKE-2). Live temperatures go to the shared state file;
-- the columns keep the last reading for the API.
CREATE TABLE nodes (
  id              INTEGER PRIMARY KEY,
  name            TEXT NOT NULL UNIQUE,
  status          TEXT NOT NULL DEFAULT 'online' CHECK (status IN ('online','offline','borrowed')),
  metrics_url     TEXT,
  gpu_temperature REAL,
  temperature_at  INTEGER,
  created_at      INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);
CREATE TRIGGER nodes_ins AFTER INSERT ON nodes BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER nodes_upd AFTER UPDATE OF name, status, metrics_url ON nodes BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER nodes_del AFTER DELETE ON nodes BEGIN UPDATE config_version SET v = v + 1; END;

ALTER TABLE replicas ADD COLUMN node_id INTEGER REFERENCES nodes(id) ON DELETE SET NULL;
ALTER TABLE replicas ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replicas ADD COLUMN started_at INTEGER NOT NULL DEFAULT 0;   -- start grace (R-HC-3)

ALTER TABLE endpoints ADD COLUMN health_check INTEGER NOT NULL DEFAULT 1;
ALTER TABLE endpoints ADD COLUMN failure_threshold INTEGER NOT NULL DEFAULT 3;
ALTER TABLE endpoints ADD COLUMN start_period_seconds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN business_probe_rounds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN wake_url TEXT;

-- R-ADM-5: who changed what, before and after (never a secret).
CREATE TABLE audit_log (
  id          INTEGER PRIMARY KEY,
  ts          INTEGER NOT NULL DEFAULT (strftime('%s','now')),
  actor       TEXT NOT NULL,          -- user name, "sluicectl", "sluice-healthd"
  tenant_id   INTEGER,
  action      TEXT NOT NULL,
  object_type TEXT NOT NULL,
  object_id   INTEGER,
  before      TEXT,                   -- JSON
  after       TEXT                    -- JSON
);
CREATE INDEX audit_by_ts ON audit_log (ts);
CREATE INDEX audit_by_tenant_ts ON audit_log (tenant_id, ts);

-- R-HC-2: alerts deduplicated by (type, replica) while active.
CREATE TABLE alerts (
  id          INTEGER PRIMARY KEY,
  type        TEXT NOT NULL,          -- ENDPOINT_UNHEALTHY, ...
  severity    TEXT NOT NULL,          -- ERROR, WARN, INFO
  status      TEXT NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE','RECOVERED')),
  tenant_id   INTEGER,
  endpoint_id INTEGER,
  replica_id  INTEGER,
  message     TEXT NOT NULL,
  created_at  INTEGER NOT NULL DEFAULT (strftime('%s','now')),
  resolved_at INTEGER
);
CREATE UNIQUE INDEX alerts_active_once ON alerts (type, replica_id) WHERE status = 'ACTIVE';

-- R-KEY-4: call and token quotas by atomic UPSERT; period is 'd:YYYY-MM-DD' or
-- 'm:YYYY-MM' in the billing time zone.
CREATE TABLE quota_counters (
  key_id  INTEGER NOT NULL,
  period  TEXT NOT NULL,
  calls   INTEGER NOT NULL DEFAULT 0,
  tokens  INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (key_id, period)
) WITHOUT ROWID;

-- R-IDEM-1..3: shared by the pool, surviving restarts.
CREATE TABLE idempotency (
  key_id       INTEGER NOT NULL,      -- api_keys.id (0 for endpoint keys: scoped by endpoint below)
  scope        TEXT NOT NULL,         -- caller scope, e.g. "k:12" or "e:3"
  idem_key     TEXT NOT NULL,
  fingerprint  TEXT NOT NULL,         -- SHA-256(method + path + body)
  state        TEXT NOT NULL CHECK (state IN ('in_progress','done')),
  owner_pid    INTEGER,
  owner_start  INTEGER,               -- /proc start time, guards PID reuse
  status       INTEGER,
  content_type TEXT,
  headers      TEXT,
  body         BLOB,
  body_bytes   INTEGER NOT NULL DEFAULT 0,
  created_at   INTEGER NOT NULL,      -- ms
  expires_at   INTEGER NOT NULL,      -- ms
  PRIMARY KEY (scope, idem_key)
) WITHOUT ROWID;
CREATE INDEX idempotency_by_expiry ON idempotency (expires_at);

-- R-ADM-2: login sessions (only the SHA-256 of the token is stored).
CREATE TABLE sessions (
  token_hash TEXT PRIMARY KEY,
  user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  csrf_token TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
