package dashboard

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// hub fans events out to the open event streams. Each stream has a
// buffer of one per kind: a burst of activity is one event to a page,
// which reloads what it shows anyway.
type hub struct {
	mu   sync.Mutex
	subs map[chan string]struct{}
}

func newHub() *hub { return &hub{subs: map[chan string]struct{}{}} }

func (h *hub) subscribe() (<-chan string, func()) {
	ch := make(chan string, 2)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *hub) publish(kind string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- kind:
		default: // it has events it has not sent yet: the page reloads then
		}
	}
}

// keepAlive is how often an idle stream sends a comment, so proxies and
// browsers keep it open. Real time: it is the transport's, not a decision.
const keepAlive = 25 * time.Second

// events is the event stream of live pages: "pass" when a pass ended,
// "activity" when activity arrived. It ends when the client goes or the
// daemon stops.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, _ *session) {
	rc := http.NewResponseController(w)
	// The server's write timeout bounds answers; a stream is not one.
	_ = rc.SetWriteDeadline(time.Time{})
	ch, cancel := d.hub.subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 5000\n: connected\n\n"); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var msg string
		select {
		case <-r.Context().Done():
			return
		case <-d.opts.Stop:
			return
		case <-tick.C:
			msg = ": keep-alive\n\n"
		case kind := <-ch:
			msg = fmt.Sprintf("event: %s\ndata: {\"kind\":%q,\"at\":%q}\n\n", kind, kind, d.opts.Clock.Now().UTC().Format(time.RFC3339))
		}
		if _, err := fmt.Fprint(w, msg); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}
