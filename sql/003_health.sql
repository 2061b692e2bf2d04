-- 003_health.sql: the replicas table for health bookkeeping (SPEC §8, R-HC-1..4).
--
-- Rebuilt with AUTOINCREMENT: the shared state keys a replica's health, bans and
-- engine metrics by its id, so an id must never come back for a new replica (without
-- it, removing the newest replica and adding another reused the id, and the new one
-- started out "removed"). Nothing references replicas by foreign key.
CREATE TABLE replicas_new (
  id                   INTEGER PRIMARY KEY AUTOINCREMENT,
  endpoint_id          INTEGER NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  url                  TEXT NOT NULL,
  engine               TEXT NOT NULL DEFAULT 'openai'
                       CHECK (engine IN ('vllm','ollama','openai','anthropic','other')),
  weight               INTEGER NOT NULL DEFAULT 1 CHECK (weight >= 0),
  max_concurrency      INTEGER NOT NULL DEFAULT 0 CHECK (max_concurrency >= 0),
  state                TEXT NOT NULL DEFAULT 'running' CHECK (state IN ('running','sleeping','disabled')),
  healthy              INTEGER NOT NULL DEFAULT 1,   -- cleared by sluice-healthd (R-HC-2)
  created_at           INTEGER NOT NULL DEFAULT (strftime('%s','now')),
  node_id              INTEGER REFERENCES nodes(id) ON DELETE SET NULL,
  consecutive_failures INTEGER NOT NULL DEFAULT 0,
  started_at           INTEGER NOT NULL DEFAULT 0,   -- start grace (R-HC-3)
  UNIQUE (endpoint_id, url)
);
INSERT INTO replicas_new (id, endpoint_id, url, engine, weight, max_concurrency, state, healthy,
                          created_at, node_id, consecutive_failures, started_at)
  SELECT id, endpoint_id, url, engine, weight, max_concurrency, state, healthy,
         created_at, node_id, consecutive_failures, started_at FROM replicas;
DROP TABLE replicas;
ALTER TABLE replicas_new RENAME TO replicas;

-- sluice-healthd writes consecutive_failures every round a replica fails. 001's
-- trigger bumped config_version on any replica update, which would make every
-- responder reload its snapshot each round: only columns the snapshot reads bump it
-- now. A column added to replicas later that the snapshot reads must be listed here.
CREATE TRIGGER replicas_ins AFTER INSERT ON replicas BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER replicas_upd AFTER UPDATE OF endpoint_id, url, engine, weight, max_concurrency,
  state, healthy, node_id ON replicas BEGIN UPDATE config_version SET v = v + 1; END;
CREATE TRIGGER replicas_del AFTER DELETE ON replicas BEGIN UPDATE config_version SET v = v + 1; END;

-- R-HC-3: the start grace counts from when a replica was added or last went to
-- `running` (an operator's or a wake's change), whoever made it.
CREATE TRIGGER replicas_started_ins AFTER INSERT ON replicas
  BEGIN UPDATE replicas SET started_at = CAST(strftime('%s','now') AS INTEGER) WHERE id = NEW.id; END;
CREATE TRIGGER replicas_started_upd AFTER UPDATE OF state ON replicas
  WHEN NEW.state = 'running' AND OLD.state <> 'running'
  BEGIN UPDATE replicas SET started_at = CAST(strftime('%s','now') AS INTEGER) WHERE id = NEW.id; END;
