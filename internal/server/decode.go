package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/openapi"
	"github.com/reclaimer/reclaimer/internal/ops"
)

// Body limits: an activity batch of 10,000 reports fits in the larger one.
const (
	maxBody      = 64 << 10
	maxBatchBody = 4 << 20
	maxBatch     = 10000
)

// readBody reads at most limit bytes of r's body: 413 beyond. An empty
// body is returned as nil.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("request body over %d bytes: %w", limit, ops.ErrTooLarge)
	}
	if err != nil {
		return nil, badRequest("", "read request body: %v", err)
	}
	return data, nil
}

// decode parses one JSON object into v, strictly: unknown fields, trailing
// data, and values of the wrong type are 400s naming the field. An empty
// body is allowed only when optional.
//
// timeField names the body's time field, if it has one: a malformed time
// is reported by encoding/json without its field.
func decode(data []byte, v any, optional bool, timeField ...string) error {
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return nil
		}
		return badRequest("", "a JSON body is required")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		err = decodeError(err)
		var in *ops.InputError
		if errors.As(err, &in) && in.Field == "" && len(timeField) > 0 && strings.Contains(in.Msg, "RFC 3339") {
			in.Field = timeField[0]
			in.Msg = timeField[0] + ": " + in.Msg
		}
		return err
	}
	if dec.More() {
		return badRequest("", "request body: more than one JSON value")
	}
	return nil
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		return badRequest(field, "field %s: want %s, got a JSON %s", orBody(field), typeErr.Type, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return badRequest("", "request body is not valid JSON (at byte %d): %v", syntaxErr.Offset, err)
	case errors.As(err, &timeErr):
		return badRequest("", "a time is not RFC 3339 (such as 2026-01-02T15:04:05Z): %v", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "request body ends early")
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		if u, err := strconv.Unquote(f); err == nil {
			f = u
		}
		return badRequest(f, "unknown field %q", f)
	}
	return badRequest("", "request body: %v", err)
}

func orBody(field string) string {
	if field == "" {
		return "(the body)"
	}
	return field
}

// parseTTL reads a hold's ttl: a positive duration of at most a week.
func parseTTL(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, badRequest(field, "%s is required: a duration such as 30s, 15m or 2h", field)
	}
	d, err := config.ParseDuration(s)
	switch {
	case err != nil:
		return 0, badRequest(field, "%s %q: %v", field, s, err)
	case d <= 0:
		return 0, badRequest(field, "%s %q: must be positive", field, s)
	case time.Duration(d) > 7*24*time.Hour:
		return 0, badRequest(field, "%s %q: at most 7d; renew the hold instead", field, s)
	}
	return time.Duration(d), nil
}

// badRequest is bad input naming its field.
func badRequest(field, format string, a ...any) error { return ops.Input(field, format, a...) }

// checkName rejects an empty or oversized backend, holder or conversation,
// and characters that would make it a path.
func checkName(field, s string) error {
	switch {
	case s == "":
		return badRequest(field, "%s is required", field)
	case len(s) > 512:
		return badRequest(field, "%s is longer than 512 bytes", field)
	case strings.ContainsAny(s, "/\x00"):
		return badRequest(field, "%s %q: must not contain / or NUL", field, s)
	}
	return nil
}

func checkSteps(field string, steps []openapi.Step) ([]backend.Step, error) {
	out := make([]backend.Step, 0, len(steps))
	for i, s := range steps {
		st := backend.Step(s)
		if !st.Valid() {
			return nil, badRequest(fmt.Sprintf("%s[%d]", field, i), "unknown step %q (caches, dependencies, suspend, archive, delete)", s)
		}
		out = append(out, st)
	}
	return out, nil
}

// Decoders of each request body, checked: what the fuzz test drives.

func decodeRegistration(data []byte) (openapi.Registration, error) {
	var v openapi.Registration
	if err := decode(data, &v, false); err != nil {
		return v, err
	}
	if err := checkName("backend", v.Backend); err != nil {
		return v, err
	}
	if err := checkName("id", v.Id); err != nil {
		return v, err
	}
	for i, c := range v.Conversations {
		if err := checkName(fmt.Sprintf("conversations[%d]", i), c); err != nil {
			return v, err
		}
	}
	return v, nil
}

func decodeActivity(data []byte) (openapi.Activity, error) {
	var v openapi.Activity
	err := decode(data, &v, true, "at")
	return v, err
}

func decodeActivityBatch(data []byte) (openapi.ActivityBatch, error) {
	var v openapi.ActivityBatch
	if err := decode(data, &v, false, "reports[].at"); err != nil {
		return v, err
	}
	if v.Reports == nil {
		return v, badRequest("reports", "reports is required")
	}
	if len(v.Reports) > maxBatch {
		return v, badRequest("reports", "%d reports: at most %d in one batch", len(v.Reports), maxBatch)
	}
	for i, r := range v.Reports {
		if err := checkName(fmt.Sprintf("reports[%d].backend", i), r.Backend); err != nil {
			return v, err
		}
		if r.Id == "" || strings.ContainsRune(r.Id, 0) {
			return v, badRequest(fmt.Sprintf("reports[%d].id", i), "reports[%d].id is required", i)
		}
	}
	return v, nil
}

func decodeHoldRequest(data []byte) (openapi.HoldRequest, time.Duration, error) {
	var v openapi.HoldRequest
	if err := decode(data, &v, false); err != nil {
		return v, 0, err
	}
	if err := checkName("holder", v.Holder); err != nil {
		return v, 0, err
	}
	ttl, err := parseTTL("ttl", v.Ttl)
	return v, ttl, err
}

func decodeHoldRenewal(data []byte) (time.Duration, error) {
	var v openapi.HoldRenewal
	if err := decode(data, &v, false); err != nil {
		return 0, err
	}
	return parseTTL("ttl", v.Ttl)
}

// retentionBody is openapi.RetentionRequest with "days" told apart from
// "days": 0 (never archive).
type retentionBody struct {
	Days    *int `json:"days"`
	Default bool `json:"default"`
}

// decodeRetention returns the retention to set, nil for the default.
func decodeRetention(data []byte) (*time.Duration, error) {
	var v retentionBody
	if err := decode(data, &v, false); err != nil {
		return nil, err
	}
	switch {
	case v.Default && v.Days != nil:
		return nil, badRequest("days", "give days or default, not both")
	case v.Default:
		return nil, nil
	case v.Days == nil:
		return nil, badRequest("days", `give "days": N (0: never archived) or "default": true`)
	case *v.Days < 0:
		return nil, badRequest("days", "days must not be negative (0: never archived)")
	case *v.Days > 36500:
		return nil, badRequest("days", "days %d: at most 36500", *v.Days)
	}
	d := time.Duration(*v.Days) * 24 * time.Hour
	return &d, nil
}

func decodePin(data []byte) (openapi.PinRequest, error) {
	var v openapi.PinRequest
	err := decode(data, &v, true)
	return v, err
}

func decodeLease(data []byte) (openapi.LeaseRequest, error) {
	var v openapi.LeaseRequest
	if err := decode(data, &v, false, "until"); err != nil {
		return v, err
	}
	if v.Until.IsZero() {
		return v, badRequest("until", "until is required: an RFC 3339 time")
	}
	return v, nil
}

func decodePass(data []byte) (openapi.PassRequest, []backend.Step, error) {
	var v openapi.PassRequest
	if err := decode(data, &v, true); err != nil {
		return v, nil, err
	}
	steps, err := checkSteps("steps", v.Steps)
	if err != nil {
		return v, nil, err
	}
	exact := v.PlanId != "" || v.Plan.ID != ""
	if exact && (len(v.Steps) > 0 || len(v.Runtimes) > 0 || v.Delete || v.Announced) {
		return v, nil, badRequest("plan_id", "a plan is applied as it is: it cannot be combined with steps, runtimes, delete or announced")
	}
	if v.PlanId != "" && v.Plan.ID != "" {
		return v, nil, badRequest("plan", "give plan_id or plan, not both")
	}
	return v, steps, nil
}

// decodeMarks reads a MarkRequest into the application layer's.
func decodeMarks(data []byte) (ops.MarkRequest, error) {
	var v struct {
		Runtimes  []string              `json:"runtimes"`
		Pin       *openapi.PinRequest   `json:"pin"`
		Unpin     bool                  `json:"unpin"`
		Lease     *openapi.LeaseRequest `json:"lease"`
		LeaseFor  string                `json:"lease_for"`
		Retention *json.RawMessage      `json:"retention"`
		Touch     bool                  `json:"touch"`
	}
	if err := decode(data, &v, false, "lease.until"); err != nil {
		return ops.MarkRequest{}, err
	}
	req := ops.MarkRequest{Unpin: v.Unpin, Touch: v.Touch}
	for _, r := range v.Runtimes {
		req.Runtimes = append(req.Runtimes, ops.Ref{Name: r})
	}
	if v.Pin != nil {
		req.PinSet, req.Pin = true, v.Pin.Reason
	}
	if v.Lease != nil {
		if v.Lease.Until.IsZero() {
			return req, badRequest("lease.until", "lease.until is required: an RFC 3339 time")
		}
		req.LeaseUntil = v.Lease.Until
	}
	if v.LeaseFor != "" {
		d, err := config.ParseDuration(v.LeaseFor)
		if err != nil || d <= 0 {
			return req, badRequest("lease_for", "lease_for %q: not a positive duration", v.LeaseFor)
		}
		req.LeaseFor = time.Duration(d)
	}
	if v.Retention != nil {
		ret, err := decodeRetention(*v.Retention)
		if err != nil {
			return req, err
		}
		req.Retention, req.RetentionDefault = ret, ret == nil
	}
	return req, nil
}

func decodePrune(data []byte) (ops.PruneRequest, error) {
	var v openapi.PruneRequest
	if err := decode(data, &v, false); err != nil {
		return ops.PruneRequest{}, err
	}
	d, err := config.ParseDuration(v.OlderThan)
	if err != nil || d <= 0 {
		return ops.PruneRequest{}, badRequest("older_than", "older_than %q: not a positive duration", v.OlderThan)
	}
	return ops.PruneRequest{OlderThan: time.Duration(d), OlderThanText: v.OlderThan, DryRun: v.DryRun}, nil
}

func decodeRestore(data []byte) (openapi.RestoreRequest, error) {
	var v openapi.RestoreRequest
	err := decode(data, &v, true)
	return v, err
}
