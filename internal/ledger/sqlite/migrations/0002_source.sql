-- Keys carry their source (ledger.Key is source + backend + id), and every
-- table names its key the same way, (backend, source, runtime_id), so that
-- the store encodes a key in one place (keyColumns in encode.go).
--
-- Rows written under schema 1 get source '': a legacy record, given by the
-- engine to the one source that lists it (Store.AdoptLegacy). runtimes also
-- gains path: the runtime's own folder, so that a runtime is found by its
-- former path after it was archived.
--
-- SQLite cannot change a primary key in place: each keyed table is made
-- again and its rows copied, all in this migration's one transaction.

CREATE TABLE runtimes_v2 (
	backend    TEXT    NOT NULL,
	source     TEXT    NOT NULL DEFAULT '',
	runtime_id TEXT    NOT NULL,
	state      TEXT    NOT NULL DEFAULT '',
	path       TEXT    NOT NULL DEFAULT '',
	home       TEXT    NOT NULL DEFAULT '',
	workspaces TEXT,
	labels     TEXT,
	size_bytes INTEGER NOT NULL DEFAULT 0,
	first_seen INTEGER,
	last_seen  INTEGER,
	decided    TEXT,
	PRIMARY KEY (backend, source, runtime_id)
) WITHOUT ROWID;
INSERT INTO runtimes_v2 (backend, source, runtime_id, state, home, workspaces, labels, size_bytes, first_seen, last_seen, decided)
	SELECT backend, '', id, state, home, workspaces, labels, size_bytes, first_seen, last_seen, decided FROM runtimes;
DROP TABLE runtimes;
ALTER TABLE runtimes_v2 RENAME TO runtimes;
CREATE INDEX runtimes_by_state ON runtimes (state, backend, source, runtime_id);
CREATE INDEX runtimes_by_source ON runtimes (source, backend, runtime_id);

CREATE TABLE activity_v2 (
	backend    TEXT    NOT NULL,
	source     TEXT    NOT NULL DEFAULT '',
	runtime_id TEXT    NOT NULL,
	at         INTEGER NOT NULL,
	PRIMARY KEY (backend, source, runtime_id)
) WITHOUT ROWID;
INSERT INTO activity_v2 (backend, source, runtime_id, at) SELECT backend, '', runtime_id, at FROM activity;
DROP TABLE activity;
ALTER TABLE activity_v2 RENAME TO activity;

ALTER TABLE holds ADD COLUMN source TEXT NOT NULL DEFAULT '';
DROP INDEX holds_by_runtime;
CREATE INDEX holds_by_runtime ON holds (backend, source, runtime_id, expires_at);

ALTER TABLE archives ADD COLUMN source TEXT NOT NULL DEFAULT '';
DROP INDEX archives_by_runtime;
CREATE INDEX archives_by_runtime ON archives (backend, source, runtime_id, created_at);

ALTER TABLE notices ADD COLUMN source TEXT NOT NULL DEFAULT '';
DROP INDEX notices_by_runtime;
CREATE INDEX notices_by_runtime ON notices (backend, source, runtime_id, at);

ALTER TABLE journal ADD COLUMN source TEXT NOT NULL DEFAULT '';
DROP INDEX journal_by_runtime;
CREATE INDEX journal_by_runtime ON journal (backend, source, runtime_id, id);
