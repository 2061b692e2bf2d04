-- 013: semantic routing (R-SEM-1..3).
-- R-SEM-1: one operator rule: a PCRE2 pattern over the last user message that forces
-- or forbids a model; tenant_id NULL: every tenant's requests. label: when it matches,
-- every candidate must carry this compliance label.
CREATE TABLE semantic_rules (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 64),
  tenant_id   INTEGER REFERENCES tenants(id) ON DELETE CASCADE,
  pattern     TEXT NOT NULL CHECK (length(pattern) BETWEEN 1 AND 4096),
  action      TEXT NOT NULL CHECK (action IN ('force','forbid')),
  model       TEXT NOT NULL CHECK (length(model) BETWEEN 1 AND 256),
  label       TEXT CHECK (label IS NULL OR length(label) BETWEEN 1 AND 64),
  created_at  INTEGER NOT NULL DEFAULT (strftime('%s','now'))
);
CREATE TRIGGER semantic_rules_ins AFTER INSERT ON semantic_rules BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER semantic_rules_upd AFTER UPDATE ON semantic_rules BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER semantic_rules_del AFTER DELETE ON semantic_rules BEGIN UPDATE config_version SET v = v + 1; END;
-- R-SEM-1: a model's tenant allow-list (tenant names, comma-separated; NULL: every
-- tenant) and compliance labels (comma-separated; NULL: none).
ALTER TABLE model_policies ADD COLUMN tenants TEXT;
ALTER TABLE model_policies ADD COLUMN labels TEXT;
-- R-SEM-1: the labels every model a key's semantic routing picks must carry (comma-separated).
ALTER TABLE api_keys ADD COLUMN require_labels TEXT;
