-- ledger.Store.PruneJournal deletes the entries finished before a time,
-- oldest first, each hour: this index finds them without reading the
-- whole journal (an unfinished entry has no outcome_at and is never
-- pruned, so it is left out). Notices are pruned by notices_by_time.
CREATE INDEX journal_finished ON journal (outcome_at) WHERE result IS NOT NULL;
