package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
)

// Recover finishes or closes what a crash left half done, sweeps the
// temporary archive objects and staging folders a killed export left, and
// opens the trash of every managed root so that leftovers are purged. It is
// idempotent: running it twice changes nothing the second time.
func (e *Engine) Recover(ctx context.Context) (int, error) {
	st := e.opts.Ledger
	unlock, ok, err := e.applyLock(true)
	if err != nil {
		return 0, fmt.Errorf("recover: %w", err)
	}
	if !ok {
		// Another process is applying: its unfinished entries are in
		// flight, not interrupted. The next start recovers what is left.
		e.log.Info("recover: another reclaimer is applying a plan; leaving recovery for later")
		return 0, nil
	}
	defer unlock()
	e.sweepTemporary(ctx)
	entries, err := st.Unfinished(ctx)
	if err != nil {
		return 0, fmt.Errorf("recover: %w", err)
	}
	if len(entries) == 0 {
		return 0, nil // the next Observe opens (and so purges) every trash
	}
	w, err := e.Observe(ctx, ObserveOptions{})
	if err != nil {
		return 0, fmt.Errorf("recover: %w", err)
	}

	n := 0
	for _, j := range entries {
		k := j.Intent.Key
		if !e.recoverable(k) {
			continue // another replica's, or the leader's: maybe in flight
		}
		if s := findRecovered(w, k); s != nil {
			k = s.Runtime.Key // an entry from before keys carried their source names its runtime so
		}
		step := backend.Step(j.Intent.Step)
		out := ledger.Outcome{At: e.opts.Now().UTC()}
		var mark func(ctx context.Context, st ledger.Store) error
		var notice *ledger.Notice // a removal finished or failed: the webhooks hear it (the outbox)
		rec, err := st.Runtime(ctx, k)
		marked := err == nil && (rec.State == string(backend.StateArchived) || rec.State == string(backend.StateDeleted))
		switch {
		case err != nil && !errors.Is(err, ledger.ErrNotFound):
			return 0, fmt.Errorf("recover %s: %w", k, err)
		case step.Destructive() && marked:
			// The archive was verified and the state flipped: finish the
			// removal if the runtime is still there.
			if s := findRecovered(w, k); s != nil && s.Runtime.State.Present() {
				if d, ok := backend.As[backend.Deleter](s.Source.Backend); ok {
					term, _ := e.termOf(s.Source)
					cctx, end, err := callCtx(ctx, term)
					if err != nil {
						continue // the term ended: the next leader recovers it
					}
					// The step matters: a provider's archive keeps what a
					// delete would lose.
					err = d.Delete(cctx, *s.Runtime, backend.DeleteOptions{Step: step, Discard: func(p string) error {
						_, err := e.discard(s.Runtime.Root, p)
						return err
					}})
					end()
					if err != nil {
						out.Result, out.Reason = ledger.ResultFailed, "finishing after a restart: "+err.Error()
						notice = &ledger.Notice{Key: k, Kind: "failed", Step: string(step), At: out.At, Message: out.Reason,
							PlanID: j.Intent.PlanID}
						break
					}
				}
			}
			out.Result, out.Reason = ledger.ResultDone, "finished after a restart"
			// The notice the interrupted apply would have written with its
			// outcome (doneNotice): what became of the runtime, and its
			// archive.
			kind := "reclaimed"
			if rec.ArchiveID != "" {
				kind = "archived"
			}
			notice = &ledger.Notice{Key: k, Kind: kind, Step: string(step), At: out.At, Message: out.Reason,
				PlanID: j.Intent.PlanID, ArchiveID: rec.ArchiveID}
		case step.Destructive():
			out.Result, out.Reason = ledger.ResultFailed, "interrupted before the removal; nothing was removed"
			e.dropInterruptedExport(ctx, k, j.Intent.PlanID, w.Find(k))
		case step == backend.StepSuspend && suspended(findRecovered(w, k)):
			// The provider's call was made, and its outcome (with the
			// state it left) never journaled: a leader whose term ended
			// during the call, or a crash. Finished as the runtime is now.
			s := findRecovered(w, k)
			out.Result, out.Reason = ledger.ResultDone, "found suspended after a restart or a change of leader"
			mark = func(ctx context.Context, st ledger.Store) error {
				return markIn(ctx, st, *s.Runtime, backend.StateSuspended, "", out.At)
			}
		default:
			out.Result, out.Reason = ledger.ResultSkipped, "interrupted; the next pass plans it again"
		}
		// Fenced for a shared source's entry: a leader whose term ended
		// meanwhile leaves it to the next one.
		err = e.writeFor(ctx, k, func(ctx context.Context, st ledger.Store) error {
			if mark != nil {
				if err := mark(ctx, st); err != nil {
					return err
				}
			}
			if notice != nil {
				if _, err := st.RecordNotice(ctx, *notice); err != nil {
					return err
				}
			}
			return st.RecordOutcome(ctx, j.ID, out)
		})
		switch {
		case Refused(err):
			e.log.Warn("recover: this replica no longer leads; the next leader recovers the rest", "runtime", k.String(), "err", err)
		case err != nil:
			return 0, fmt.Errorf("recover %s: %w", k, err)
		default:
			n++
		}
	}
	return n, nil
}

// suspended tells whether a recovered runtime is there and suspended.
func suspended(s *Seen) bool { return s != nil && s.Runtime.State == backend.StateSuspended }

// findRecovered finds the runtime of an unfinished journal entry. An entry
// written before keys carried their source names none: it is the runtime
// of that backend and ID when exactly one source lists one.
func findRecovered(w *World, k backend.Key) *Seen {
	if k.Source != "" {
		return w.Find(k)
	}
	var found *Seen
	for _, s := range w.Runtimes {
		if s.Runtime.Backend == k.Backend && s.Runtime.ID == k.ID {
			if found != nil {
				return nil
			}
			found = s
		}
	}
	return found
}
