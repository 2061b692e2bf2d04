-- 007_billing.sql: billing correctness (R-KEY-5, R-USE-1..4).
-- Quota counters hold integers only: an arithmetic overflow can no longer turn one
-- into a REAL that refuses the key for the rest of the month.
CREATE TABLE quota_counters_new (
  key_id  INTEGER NOT NULL,
  period  TEXT NOT NULL,
  calls   INTEGER NOT NULL DEFAULT 0 CHECK (typeof(calls) = 'integer' AND calls >= 0),
  tokens  INTEGER NOT NULL DEFAULT 0 CHECK (typeof(tokens) = 'integer' AND tokens >= 0),
  PRIMARY KEY (key_id, period)
) WITHOUT ROWID;
INSERT INTO quota_counters_new (key_id, period, calls, tokens)
  SELECT key_id, period, CAST(max(min(calls, 9e18), 0) AS INTEGER), CAST(max(min(tokens, 9e18), 0) AS INTEGER)
  FROM quota_counters;
DROP TABLE quota_counters;
ALTER TABLE quota_counters_new RENAME TO quota_counters;
-- R-USE-1: 1 when the upstream sent no usage and the tokens were counted from what was relayed.
ALTER TABLE usage_events ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0;
-- R-SEC-5: a user's key ceiling also limits its login sessions on the data plane,
-- so responders reload when a ceiling changes.
CREATE TRIGGER key_ceilings_ins AFTER INSERT ON key_ceilings BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER key_ceilings_upd AFTER UPDATE ON key_ceilings BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER key_ceilings_del AFTER DELETE ON key_ceilings BEGIN UPDATE config_version SET v = v + 1; END;
