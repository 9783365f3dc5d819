-- The outbox of webhook deliveries (ledger.Store.PendingNotices): a notice
-- is owed to every [[notify]] webhook that wants its kind until its row
-- here, per notice and webhook (the webhook's stable name, never its URL),
-- says delivered or given up. outbox = false marks the notices recorded
-- before this version (the program then sent them from memory, or lost
-- them) and those a copy loaded (their deliveries were the old ledger's):
-- they are not owed, so neither an upgrade nor a copy re-sends anything.
-- plan_id, archive_id and freed_bytes are what the webhook body says
-- besides: the plan that made the notice, and what a step done archived
-- and freed.
ALTER TABLE notices ADD COLUMN outbox boolean NOT NULL DEFAULT true;
UPDATE notices SET outbox = false;
ALTER TABLE notices ADD COLUMN plan_id text NOT NULL DEFAULT '';
ALTER TABLE notices ADD COLUMN archive_id text NOT NULL DEFAULT '';
ALTER TABLE notices ADD COLUMN freed_bytes bigint NOT NULL DEFAULT 0;

CREATE TABLE notice_deliveries (
	notice_id    bigint NOT NULL REFERENCES notices (id),
	hook         text COLLATE "C" NOT NULL,
	attempts     integer NOT NULL DEFAULT 0,
	delivered_at bigint,
	gave_up_at   bigint,
	last_error   text NOT NULL DEFAULT '',
	updated_at   bigint NOT NULL,
	PRIMARY KEY (notice_id, hook)
);
