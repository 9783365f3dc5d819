-- The outbox of webhook deliveries (ledger.Store.PendingNotices): a notice
-- is owed to every [[notify]] webhook that wants its kind until its row
-- here, per notice and webhook (the webhook's stable name, never its URL),
-- says delivered or given up. outbox = 0 marks the notices recorded before
-- this version (the program then sent them from memory, or lost them):
-- they are not owed, so an upgrade re-sends nothing. plan_id, archive_id
-- and freed_bytes are what the webhook body says besides: the plan that
-- made the notice, and what a step done archived and freed.
ALTER TABLE notices ADD COLUMN outbox INTEGER NOT NULL DEFAULT 1;
UPDATE notices SET outbox = 0;
ALTER TABLE notices ADD COLUMN plan_id TEXT NOT NULL DEFAULT '';
ALTER TABLE notices ADD COLUMN archive_id TEXT NOT NULL DEFAULT '';
ALTER TABLE notices ADD COLUMN freed_bytes INTEGER NOT NULL DEFAULT 0;

CREATE TABLE notice_deliveries (
	notice_id    INTEGER NOT NULL REFERENCES notices (id),
	hook         TEXT    NOT NULL,
	attempts     INTEGER NOT NULL DEFAULT 0,
	delivered_at INTEGER,
	gave_up_at   INTEGER,
	last_error   TEXT    NOT NULL DEFAULT '',
	updated_at   INTEGER NOT NULL,
	PRIMARY KEY (notice_id, hook)
) WITHOUT ROWID;
