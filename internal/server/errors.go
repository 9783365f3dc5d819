package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/openapi"
)

// apiError is an error with its HTTP status, code and (for 400) the field
// at fault.
type apiError struct {
	status int
	code   openapi.ErrorErrorCode
	field  string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(field, format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, openapi.BadRequest, field, fmt.Sprintf(format, a...)}
}

func notFound(format string, a ...any) *apiError {
	return &apiError{http.StatusNotFound, openapi.NotFound, "", fmt.Sprintf(format, a...)}
}

func conflict(format string, a ...any) *apiError {
	return &apiError{http.StatusConflict, openapi.Conflict, "", fmt.Sprintf(format, a...)}
}

func locked(format string, a ...any) *apiError {
	return &apiError{http.StatusLocked, openapi.Busy, "", fmt.Sprintf(format, a...)}
}

// ArchivedMessage is the text of every 410.
const ArchivedMessage = "runtime was archived; its history is read-only"

var errArchived = &apiError{http.StatusGone, openapi.Archived, "", ArchivedMessage}

var errShuttingDown = &apiError{http.StatusServiceUnavailable, openapi.ShuttingDown, "", "the daemon is shutting down; retry against the next one"}

var errUnauthorized = &apiError{http.StatusUnauthorized, openapi.Unauthorized, "", `missing or wrong bearer token: send "Authorization: Bearer <token>"`}

// writeError maps err to its status: an *apiError as it is, the sentinel
// categories of backend and ledger to theirs, anything else to 500.
func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, backend.ErrNotFound), errors.Is(err, ledger.ErrNotFound):
		ae = notFound("%v", err)
	case errors.Is(err, backend.ErrConflict), errors.Is(err, ledger.ErrConflict):
		ae = conflict("%v", err)
	case errors.Is(err, backend.ErrBusy):
		ae = locked("%v", err)
	case errors.Is(err, ledger.ErrTimeRange):
		ae = badRequest("", "%v", err)
	default:
		ae = &apiError{http.StatusInternalServerError, openapi.Internal, "", err.Error()}
	}
	if ae.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="reclaimer"`)
	}
	var body openapi.Error
	body.Error.Code, body.Error.Message, body.Error.Field = ae.code, ae.msg, ae.field
	writeJSON(w, ae.status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// paramError turns the generated router's parameter errors into 400s that
// name the parameter.
func paramError(w http.ResponseWriter, _ *http.Request, err error) {
	var inv *openapi.InvalidParamFormatError
	var req *openapi.RequiredParamError
	switch {
	case errors.As(err, &inv):
		writeError(w, badRequest(inv.ParamName, "parameter %s: %v", inv.ParamName, inv.Err))
	case errors.As(err, &req):
		writeError(w, badRequest(req.ParamName, "parameter %s is required", req.ParamName))
	default:
		writeError(w, badRequest("", "%v", err))
	}
}
