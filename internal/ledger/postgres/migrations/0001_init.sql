-- Times are bigint nanoseconds since the Unix epoch (UTC), as in the
-- SQLite store; NULL is the zero time. Not timestamptz: it keeps only
-- microseconds, and the ledger's contract is nanoseconds from 1677 to 2262
-- (ledger.MinTime..MaxTime), read back exactly.
--
-- A runtime's key is (backend, runtime_id) in every table, in the "C"
-- collation: rows list in bytewise order (ledger.Key.Compare), whatever
-- the database's default collation. The Go side builds these columns in
-- one place (key.go). Side tables do not reference runtimes: activity,
-- holds and journal entries may come before any pass observed a runtime.

CREATE TABLE runtimes (
	backend            text COLLATE "C" NOT NULL,
	runtime_id         text COLLATE "C" NOT NULL,
	-- Observed by passes (Observe).
	state              text   NOT NULL DEFAULT '',
	home               text   NOT NULL DEFAULT '',
	workspaces         text[],            -- NULL: none
	labels             jsonb,             -- NULL: none
	size_bytes         bigint NOT NULL DEFAULT 0,
	first_seen         bigint,
	last_seen          bigint,
	-- Decided by the engine and users (Update only).
	pinned             boolean NOT NULL DEFAULT false,
	pin_reason         text    NOT NULL DEFAULT '',
	lease_until        bigint,
	retention_override bigint,            -- nanoseconds; NULL: the default
	scheduled_step     text    NOT NULL DEFAULT '',
	scheduled_due      bigint,
	scheduled_at       bigint,
	archive_id         text    NOT NULL DEFAULT '',
	conversations      text[],            -- NULL: none
	registered_at      bigint,
	released_at        bigint,
	-- Whether anything is decided: what a pass reads in full (most
	-- runtimes have nothing, and are read as a key and a state).
	decided boolean GENERATED ALWAYS AS (
		pinned OR pin_reason <> '' OR lease_until IS NOT NULL OR retention_override IS NOT NULL
		OR scheduled_step <> '' OR scheduled_due IS NOT NULL OR scheduled_at IS NOT NULL
		OR archive_id <> '' OR conversations IS NOT NULL
		OR registered_at IS NOT NULL OR released_at IS NOT NULL) STORED,
	PRIMARY KEY (backend, runtime_id)
);

CREATE INDEX runtimes_by_state ON runtimes (state, backend, runtime_id);
CREATE INDEX runtimes_decided ON runtimes (backend, runtime_id) WHERE decided;

-- Activity is written thousands of times a second across replicas: room
-- in each page and no index on at keep those updates HOT (no index write).
CREATE TABLE activity (
	backend    text COLLATE "C" NOT NULL,
	runtime_id text COLLATE "C" NOT NULL,
	at         bigint NOT NULL,
	PRIMARY KEY (backend, runtime_id)
) WITH (fillfactor = 70);

CREATE TABLE holds (
	id         text PRIMARY KEY,
	backend    text COLLATE "C" NOT NULL,
	runtime_id text COLLATE "C" NOT NULL,
	holder     text   NOT NULL,
	taken_at   bigint NOT NULL,
	expires_at bigint NOT NULL
);

CREATE INDEX holds_by_runtime ON holds (backend, runtime_id, expires_at);
CREATE INDEX holds_by_expiry ON holds (expires_at);

CREATE TABLE archives (
	id         text PRIMARY KEY,
	backend    text COLLATE "C" NOT NULL,
	runtime_id text COLLATE "C" NOT NULL,
	created_at bigint NOT NULL,
	location   text   NOT NULL DEFAULT '',
	formats    text[],                    -- NULL: none
	bytes      bigint NOT NULL DEFAULT 0,
	objects    jsonb,                     -- [{name, bytes, sha256}]; NULL: none
	manifest   jsonb
);

CREATE INDEX archives_by_runtime ON archives (backend, runtime_id, created_at);

CREATE TABLE notices (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	backend    text COLLATE "C" NOT NULL,
	runtime_id text COLLATE "C" NOT NULL,
	kind       text   NOT NULL,
	step       text   NOT NULL DEFAULT '',
	due        bigint,
	at         bigint NOT NULL,
	message    text   NOT NULL DEFAULT ''
);

-- The same notice recorded twice (a retried pass, on any replica) is one
-- notice: this index makes that hold under concurrency. The message goes
-- in as its md5 (an index entry must stay small), a NULL due as the
-- lowest bigint (NULLs would never conflict).
CREATE UNIQUE INDEX notices_identical ON notices
	(backend, runtime_id, kind, step, (COALESCE(due, -9223372036854775808)), at, (md5(message)));
CREATE INDEX notices_by_runtime ON notices (backend, runtime_id, at);
CREATE INDEX notices_by_time ON notices (at);

CREATE TABLE journal (
	id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	plan_id        text   NOT NULL DEFAULT '',
	backend        text COLLATE "C" NOT NULL,
	runtime_id     text COLLATE "C" NOT NULL,
	step           text   NOT NULL,
	paths          text[],                -- NULL: none
	reason         text   NOT NULL DEFAULT '',
	at             bigint NOT NULL,
	result         text,                  -- NULL while unfinished
	outcome_reason text   NOT NULL DEFAULT '',
	freed_bytes    bigint NOT NULL DEFAULT 0,
	outcome_at     bigint
);

CREATE INDEX journal_by_plan ON journal (plan_id, id);
CREATE INDEX journal_by_runtime ON journal (backend, runtime_id, id);
-- Start-up recovery reads only unfinished entries; keep that read small.
CREATE INDEX journal_unfinished ON journal (id) WHERE result IS NULL;

-- Leadership leases (package leader). One row per lease name while some
-- replica holds it; taken by deleting an expired row and inserting, as
-- River's elector does. generation is the fencing token: it comes from a
-- sequence, so it rises at every takeover even though the row is deleted
-- in between, and is never handed out twice. Expiry is judged by the
-- database's clock alone (reclaimer_clock), never a replica's, so clock
-- skew between hosts cannot make two leaders. A logged table, unlike
-- River's: a crash of the server must not forget which generation is in
-- force while a leader still acts on it (writes are a few a minute).
CREATE SEQUENCE leader_generation AS bigint;

CREATE TABLE leader_leases (
	name       text   PRIMARY KEY,
	holder     text   NOT NULL,
	generation bigint NOT NULL UNIQUE,
	elected_at bigint NOT NULL,
	expires_at bigint NOT NULL
);

-- The one clock of leases and fences: the server's, in nanoseconds (with
-- its microsecond resolution). clock_timestamp, not now(): a statement in
-- a long transaction must see the time it runs at.
CREATE FUNCTION reclaimer_clock() RETURNS bigint
	LANGUAGE sql VOLATILE
	AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 1000 $$;
