package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/ops"
)

// ArchivedMessage is the text of every 410 about a runtime.
var ArchivedMessage = ops.ErrArchived.Error()

// writeError answers err with the status and code of its category
// (ops.Classify, the one mapping), its message, and the field at fault.
func writeError(w http.ResponseWriter, err error) {
	cat := ops.Classify(err)
	var body openapi.Error
	body.Error.Code, body.Error.Message = openapi.ErrorErrorCode(cat.Code), err.Error()
	var in *ops.InputError
	if errors.As(err, &in) {
		body.Error.Field = in.Field
	}
	switch {
	case cat == ops.CatArchived && errors.Is(err, ops.ErrArchived):
		body.Error.Message = ArchivedMessage
	case cat == ops.CatUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="reclaimer"`)
	case cat == ops.CatShuttingDown:
		w.Header().Set("Connection", "close")
	case cat == ops.CatBusy || cat == ops.CatUnavailable:
		w.Header().Set("Retry-After", "5")
	}
	writeJSON(w, cat.Status, body)
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
		writeError(w, ops.Input(inv.ParamName, "parameter %s: %v", inv.ParamName, inv.Err))
	case errors.As(err, &req):
		writeError(w, ops.Input(req.ParamName, "parameter %s is required", req.ParamName))
	default:
		writeError(w, ops.Input("", "%v", err))
	}
}
