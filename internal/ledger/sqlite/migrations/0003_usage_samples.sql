-- Each pass samples every managed filesystem: used, free and capacity,
-- and what its plan would free there by step (JSON text, NULL for none).
-- The series behind the usage chart and its forecast; pruned after
-- [server] usage_retention. host is "" on one host: in a fleet each host
-- samples its own filesystems.
CREATE TABLE usage_samples (
	host        TEXT    NOT NULL DEFAULT '',
	path        TEXT    NOT NULL,
	at          INTEGER NOT NULL,
	used_bytes  INTEGER NOT NULL,
	avail_bytes INTEGER NOT NULL,
	total_bytes INTEGER NOT NULL,
	reclaimable TEXT,
	PRIMARY KEY (host, path, at)
) WITHOUT ROWID;

CREATE INDEX usage_samples_by_time ON usage_samples (at);
