// Package api holds the OpenAPI 3.1 document of the daemon's HTTP API,
// api/openapi.yaml: the one source of the server interface and the Go
// client (internal/openapi, made by go generate), and what the daemon
// serves at /openapi.json.
package api

import (
	_ "embed"
	"sync"

	"sigs.k8s.io/yaml"
)

// YAML is api/openapi.yaml as written.
//
//go:embed openapi.yaml
var YAML []byte

// JSON returns the document as JSON (converted once).
var JSON = sync.OnceValues(func() ([]byte, error) { return yaml.YAMLToJSON(YAML) })
