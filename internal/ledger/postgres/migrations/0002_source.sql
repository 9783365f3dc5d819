-- Keys carry their source (ledger.Key is source + backend + id), and every
-- table names its key the same way, (backend, source, runtime_id), in the
-- "C" collation, so that the store encodes a key in one place (key.go) and
-- rows list in ledger.Key.Compare's order.
--
-- Rows written under schema 1 get source '': a legacy record, given by the
-- engine to the one source that lists it (Store.AdoptLegacy). runtimes also
-- gains path: the runtime's own folder, so that a runtime is found by its
-- former path after it was archived.

ALTER TABLE runtimes ADD COLUMN source text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE runtimes ADD COLUMN path text NOT NULL DEFAULT '';
ALTER TABLE runtimes DROP CONSTRAINT runtimes_pkey;
ALTER TABLE runtimes ADD PRIMARY KEY (backend, source, runtime_id);
DROP INDEX runtimes_by_state;
CREATE INDEX runtimes_by_state ON runtimes (state, backend, source, runtime_id);
DROP INDEX runtimes_decided;
CREATE INDEX runtimes_decided ON runtimes (backend, source, runtime_id) WHERE decided;
CREATE INDEX runtimes_by_source ON runtimes (source, backend, runtime_id);

ALTER TABLE activity ADD COLUMN source text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE activity DROP CONSTRAINT activity_pkey;
ALTER TABLE activity ADD PRIMARY KEY (backend, source, runtime_id);

ALTER TABLE holds ADD COLUMN source text COLLATE "C" NOT NULL DEFAULT '';
DROP INDEX holds_by_runtime;
CREATE INDEX holds_by_runtime ON holds (backend, source, runtime_id, expires_at);

ALTER TABLE archives ADD COLUMN source text COLLATE "C" NOT NULL DEFAULT '';
DROP INDEX archives_by_runtime;
CREATE INDEX archives_by_runtime ON archives (backend, source, runtime_id, created_at);

ALTER TABLE notices ADD COLUMN source text COLLATE "C" NOT NULL DEFAULT '';
DROP INDEX notices_identical;
CREATE UNIQUE INDEX notices_identical ON notices
	(backend, source, runtime_id, kind, step, (COALESCE(due, -9223372036854775808)), at, (md5(message)));
DROP INDEX notices_by_runtime;
CREATE INDEX notices_by_runtime ON notices (backend, source, runtime_id, at);

ALTER TABLE journal ADD COLUMN source text COLLATE "C" NOT NULL DEFAULT '';
DROP INDEX journal_by_runtime;
CREATE INDEX journal_by_runtime ON journal (backend, source, runtime_id, id);
