package ops

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/plan"
)

// Errors of the application layer, besides backend's categories.
var (
	// ErrArchived: the runtime was archived; its history is read-only.
	ErrArchived = errors.New("runtime was archived; its history is read-only")
	// ErrAmbiguous: a name matches more than one runtime.
	ErrAmbiguous = errors.New("ambiguous")
	// ErrShuttingDown: the daemon is stopping.
	ErrShuttingDown = errors.New("the daemon is shutting down; retry against the next one")
	// ErrUnauthorized: no token, or a wrong one.
	ErrUnauthorized = errors.New(`missing or wrong bearer token: send "Authorization: Bearer <token>"`)
	// ErrTooLarge: a request body over its limit.
	ErrTooLarge = errors.New("request body too large")
	// ErrCanceled: the caller went away or was interrupted.
	ErrCanceled = errors.New("interrupted")
)

// InputError is bad input: a flag, a request field, a name that cannot
// mean anything. Field names the input at fault, when there is one.
type InputError struct {
	Field string
	Msg   string
}

func (e *InputError) Error() string { return e.Msg }

// Input returns an InputError about field.
func Input(field, format string, a ...any) error {
	return &InputError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// Category is how an edge reports an error: its API code, HTTP status and
// exit code. Every error maps to exactly one, in Classify: the one place
// where categories meet the edges.
type Category struct {
	Code   string
	Status int
	Exit   int
}

// The categories. Exit 2 is bad usage or configuration, 1 anything else.
var (
	CatBadRequest   = Category{"bad_request", http.StatusBadRequest, 2}
	CatUnauthorized = Category{"unauthorized", http.StatusUnauthorized, 2}
	CatNotFound     = Category{"not_found", http.StatusNotFound, 1}
	CatAmbiguous    = Category{"ambiguous", http.StatusConflict, 2}
	CatConflict     = Category{"conflict", http.StatusConflict, 1}
	CatArchived     = Category{"archived", http.StatusGone, 1}
	CatTooLarge     = Category{"too_large", http.StatusRequestEntityTooLarge, 2}
	CatBusy         = Category{"busy", http.StatusLocked, 1}
	CatProtected    = Category{"protected", http.StatusLocked, 1}
	CatUnsupported  = Category{"unsupported", http.StatusNotImplemented, 1}
	CatUnavailable  = Category{"unavailable", http.StatusBadGateway, 1}
	CatShuttingDown = Category{"shutting_down", http.StatusServiceUnavailable, 1}
	CatCanceled     = Category{"canceled", 499, 1}
	CatInternal     = Category{"internal", http.StatusInternalServerError, 1}
)

// Categories lists every category, for the API document's enum (a test
// holds them to each other).
var Categories = []Category{CatBadRequest, CatUnauthorized, CatNotFound, CatAmbiguous, CatConflict, CatArchived,
	CatTooLarge, CatBusy, CatProtected, CatUnsupported, CatUnavailable, CatShuttingDown, CatCanceled, CatInternal, CatNotLeader}

// Classify maps err to its category.
func Classify(err error) Category {
	var in *InputError
	var cat categorized
	switch {
	case err == nil:
		return Category{}
	case errors.As(err, &cat):
		return cat.Category()
	case errors.As(err, &in), errors.Is(err, config.ErrInvalid), errors.Is(err, plan.ErrInvalid), errors.Is(err, ledger.ErrTimeRange):
		return CatBadRequest
	case errors.Is(err, ErrUnauthorized):
		return CatUnauthorized
	case errors.Is(err, ErrAmbiguous):
		return CatAmbiguous
	case errors.Is(err, ErrArchived):
		return CatArchived
	case errors.Is(err, ErrTooLarge):
		return CatTooLarge
	case errors.Is(err, ErrShuttingDown):
		return CatShuttingDown
	case errors.Is(err, backend.ErrNotFound):
		return CatNotFound
	case errors.Is(err, backend.ErrConflict):
		return CatConflict
	case errors.Is(err, backend.ErrBusy):
		return CatBusy
	case errors.Is(err, backend.ErrProtected):
		return CatProtected
	case errors.Is(err, errors.ErrUnsupported):
		return CatUnsupported
	case errors.Is(err, backend.ErrUnavailable):
		return CatUnavailable
	case errors.Is(err, ErrCanceled), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return CatCanceled
	}
	return CatInternal
}

// categorized is an error that knows its category (an API error the
// --server client read back).
type categorized interface {
	error
	Category() Category
}

// CategoryOf returns the category whose API code is code.
func CategoryOf(code string) (Category, bool) {
	for _, c := range Categories {
		if c.Code == code {
			return c, true
		}
	}
	return Category{}, false
}

// RemoteError is an error the daemon answered, read back by the --server
// client: it keeps its category, so both edges exit alike.
type RemoteError struct {
	Cat     Category
	Field   string
	Message string
}

func (e *RemoteError) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// Category implements categorized.
func (e *RemoteError) Category() Category { return e.Cat }
