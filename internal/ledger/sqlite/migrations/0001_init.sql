-- Times are INTEGER nanoseconds since the Unix epoch (UTC); NULL is the zero
-- time. Lists and maps are JSON text; NULL is empty. Keys of side tables are
-- not foreign keys to runtimes on purpose: activity, holds and journal
-- entries may arrive for a runtime before any pass has observed it.

-- What the engine and users decided about a runtime (pin, lease, retention
-- override, schedule, archive id) is one JSON document, NULL when nothing was
-- decided, which is most runtimes. Why one column: a pass lists every
-- runtime, and reading a column costs about the same whether it holds
-- anything or not; eight mostly empty columns were a third of the time of
-- listing 100,000 runtimes. Observations never write it.
CREATE TABLE runtimes (
	backend    TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	state      TEXT    NOT NULL DEFAULT '',
	home       TEXT    NOT NULL DEFAULT '',
	workspaces TEXT,
	labels     TEXT,
	size_bytes INTEGER NOT NULL DEFAULT 0,
	first_seen INTEGER,
	last_seen  INTEGER,
	decided    TEXT,
	PRIMARY KEY (backend, id)
) WITHOUT ROWID;

CREATE INDEX runtimes_by_state ON runtimes (state, backend, id);

CREATE TABLE activity (
	backend    TEXT    NOT NULL,
	runtime_id TEXT    NOT NULL,
	at         INTEGER NOT NULL,
	PRIMARY KEY (backend, runtime_id)
) WITHOUT ROWID;

CREATE TABLE holds (
	id         TEXT    NOT NULL PRIMARY KEY,
	backend    TEXT    NOT NULL,
	runtime_id TEXT    NOT NULL,
	holder     TEXT    NOT NULL,
	taken_at   INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);

CREATE INDEX holds_by_runtime ON holds (backend, runtime_id, expires_at);
CREATE INDEX holds_by_expiry ON holds (expires_at);

CREATE TABLE archives (
	id         TEXT    NOT NULL PRIMARY KEY,
	backend    TEXT    NOT NULL,
	runtime_id TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	location   TEXT    NOT NULL DEFAULT '',
	formats    TEXT,
	bytes      INTEGER NOT NULL DEFAULT 0,
	objects    TEXT,
	manifest   TEXT
);

CREATE INDEX archives_by_runtime ON archives (backend, runtime_id, created_at);

CREATE TABLE notices (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	backend    TEXT    NOT NULL,
	runtime_id TEXT    NOT NULL,
	kind       TEXT    NOT NULL,
	step       TEXT    NOT NULL DEFAULT '',
	due        INTEGER,
	at         INTEGER NOT NULL,
	message    TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX notices_by_runtime ON notices (backend, runtime_id, at);
CREATE INDEX notices_by_time ON notices (at);

CREATE TABLE journal (
	id             INTEGER PRIMARY KEY AUTOINCREMENT,
	plan_id        TEXT    NOT NULL DEFAULT '',
	backend        TEXT    NOT NULL,
	runtime_id     TEXT    NOT NULL,
	step           TEXT    NOT NULL,
	paths          TEXT,
	reason         TEXT    NOT NULL DEFAULT '',
	at             INTEGER NOT NULL,
	result         TEXT,
	outcome_reason TEXT    NOT NULL DEFAULT '',
	freed_bytes    INTEGER NOT NULL DEFAULT 0,
	outcome_at     INTEGER
);

CREATE INDEX journal_by_plan ON journal (plan_id, id);
CREATE INDEX journal_by_runtime ON journal (backend, runtime_id, id);
-- Start-up recovery reads only unfinished entries; keep that read small.
CREATE INDEX journal_unfinished ON journal (id) WHERE result IS NULL;
