-- Each pass samples every managed filesystem: used, free and capacity,
-- and what its plan would free there by step (NULL for none). The series
-- behind the usage chart and its forecast; pruned after [server]
-- usage_retention. host is '' on one host: in a fleet each host samples
-- its own filesystems. (Version 4: version 3 is the replicas table.)
CREATE TABLE usage_samples (
	host        text COLLATE "C" NOT NULL DEFAULT '',
	path        text COLLATE "C" NOT NULL,
	at          bigint NOT NULL,
	used_bytes  bigint NOT NULL,
	avail_bytes bigint NOT NULL,
	total_bytes bigint NOT NULL,
	reclaimable jsonb,
	PRIMARY KEY (host, path, at)
);

CREATE INDEX usage_samples_by_time ON usage_samples (at);
