-- 004_admin.sql: management API state (SPEC §20): key ceilings per user (R-SEC-5),
-- model policies (§0, R-AUTO), per-key routing policies (R-AUTO-1), login throttling
-- (R-ADM-2, R-SEC-6), and the indexes the usage and audit listings read by (R-USE-7).

-- R-SEC-5: the most any key of this user may allow; 0 = no ceiling. A user without
-- a row has no ceiling. Set by the operator, or by an admin for the members of its
-- tenant within its own ceiling; nobody but the operator raises their own.
CREATE TABLE key_ceilings (
  user_id             INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  qps_limit           INTEGER NOT NULL DEFAULT 0 CHECK (qps_limit >= 0),
  concurrency_limit   INTEGER NOT NULL DEFAULT 0 CHECK (concurrency_limit >= 0),
  daily_limit         INTEGER NOT NULL DEFAULT 0 CHECK (daily_limit >= 0),
  monthly_quota       INTEGER NOT NULL DEFAULT 0 CHECK (monthly_quota >= 0),
  tpm_limit           INTEGER NOT NULL DEFAULT 0 CHECK (tpm_limit >= 0),
  monthly_token_quota INTEGER NOT NULL DEFAULT 0 CHECK (monthly_token_quota >= 0)
);

-- SPEC §0 model policy, per public model name (names may contain '/').
CREATE TABLE IF NOT EXISTS model_policies (
  model               TEXT PRIMARY KEY,
  purpose             TEXT CHECK (purpose IN ('chat','completion','embedding')),  -- NULL: unset
  routing_enabled     INTEGER NOT NULL DEFAULT 1,
  quality_score       REAL,                 -- 0..100
  price_input_per_1k  REAL,                 -- price units per 1 000 prompt tokens
  price_output_per_1k REAL,
  supports_tools      INTEGER NOT NULL DEFAULT 0,
  supports_vision     INTEGER NOT NULL DEFAULT 0,
  max_context         INTEGER,
  max_output          INTEGER,
  description         TEXT,                 -- capability description (R-SEM-2)
  updated_at          INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);
CREATE TRIGGER model_policies_ins AFTER INSERT ON model_policies BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER model_policies_upd AFTER UPDATE ON model_policies BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER model_policies_del AFTER DELETE ON model_policies BEGIN UPDATE config_version SET v = v + 1; END;

-- R-AUTO-1: per member key, wins over the global settings. NULL = inherit.
CREATE TABLE key_routing_policies (
  key_id                INTEGER PRIMARY KEY REFERENCES api_keys(id) ON DELETE CASCADE,
  auto_routing_enabled  INTEGER,
  auto_routing_strategy TEXT CHECK (auto_routing_strategy IN ('balanced','cost','latency','semantic')),
  updated_at            INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);
CREATE TRIGGER key_routing_policies_ins AFTER INSERT ON key_routing_policies BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER key_routing_policies_upd AFTER UPDATE ON key_routing_policies BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER key_routing_policies_del AFTER DELETE ON key_routing_policies BEGIN UPDATE config_version SET v = v + 1; END;

-- R-ADM-2 / R-SEC-6: failed logins per scope ("u:NAME", "ip:ADDR"); the admin CGI
-- is one process per request, so the counter lives here.
CREATE TABLE login_failures (
  scope        TEXT PRIMARY KEY,
  failures     INTEGER NOT NULL DEFAULT 0,
  first_at     INTEGER NOT NULL,      -- seconds; the window starts here
  locked_until INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE INDEX sessions_by_expiry ON sessions (expires_at);
CREATE INDEX sessions_by_user ON sessions (user_id);

-- R-USE-7: reports read usage_daily by (tenant, day) and (user, day); retention
-- deletes events by time.
CREATE INDEX usage_daily_by_tenant_day ON usage_daily (tenant_id, day);
CREATE INDEX usage_daily_by_user_day ON usage_daily (user_id, day);
CREATE INDEX usage_events_by_ts ON usage_events (ts_ms);

CREATE INDEX audit_by_object ON audit_log (object_type, object_id);
CREATE INDEX alerts_by_status ON alerts (status, created_at);
