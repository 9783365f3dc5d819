-- The replicas of a fleet, one row each, written by the replica itself
-- every third of its leadership lease (Store.Heartbeat): what status shows
-- of who runs where. heartbeat_at is the database's clock
-- (reclaimer_clock), like the leases, so hosts' clocks never count. A row
-- is never deleted by another replica: one that stopped shows its last
-- heartbeat until an operator removes it.
CREATE TABLE replicas (
	name         text COLLATE "C" PRIMARY KEY,
	version      text   NOT NULL DEFAULT '',
	api          text   NOT NULL DEFAULT '', -- where its API listens, as configured
	holder       text   NOT NULL DEFAULT '', -- its name in leader_leases
	started_at   bigint NOT NULL,
	heartbeat_at bigint NOT NULL
);

-- A replica's pass reads only its own sources' records (Store.
-- RuntimeStatesIn, ActivityTimesIn): runtimes has runtimes_by_source; this
-- is activity's. source never changes, so activity's updates stay HOT.
CREATE INDEX activity_by_source ON activity (source, backend, runtime_id);
