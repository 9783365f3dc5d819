package fakes

import (
	_ "embed"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

//go:embed specs/openhands-cloud.json
var openhandsCloudSpec []byte

//go:embed specs/openhands-agent-server.json
var agentServerSpec []byte

//go:embed specs/cloudflare-sandbox-bridge.json
var cloudflareBridgeSpec []byte

//go:embed specs/cloudflare-containers.json
var cloudflareContainersSpec []byte

// OpenHandsCloudSpec returns the OpenHands Cloud app server's published
// document, patched as specs/README.md says.
func OpenHandsCloudSpec() (*openapi3.T, error) {
	return loadSpec("openhands-cloud.json", openhandsCloudSpec, func(doc *openapi3.T) {
		// pydantic's json_schema_extra keys, not JSON Schema keywords.
		dropKeywords(doc, "acp_compatible", "openhands_settings", "openhands_settings_section")
		// pydantic's Decimal pattern uses a look-ahead Go's regexp lacks.
		dropPatterns(doc, "(?!")
		// The handler's path template names {id} but declares only the
		// query parameter sandbox_id, which it reads.
		if pi := doc.Paths.Find("/api/v1/sandboxes/{id}"); pi != nil && pi.Delete != nil {
			pi.Delete.Parameters = append(pi.Delete.Parameters,
				&openapi3.ParameterRef{Value: openapi3.NewPathParameter("id").WithSchema(openapi3.NewStringSchema())})
		}
	})
}

// AgentServerSpec returns the OpenHands agent-server's published document,
// patched as specs/README.md says.
func AgentServerSpec() (*openapi3.T, error) {
	return loadSpec("openhands-agent-server.json", agentServerSpec, func(doc *openapi3.T) {
		dropKeywords(doc, "lte") // pydantic's bound, next to the real maximum
	})
}

// CloudflareBridgeSpec returns the Cloudflare Sandbox bridge Worker's
// published document.
func CloudflareBridgeSpec() (*openapi3.T, error) {
	return loadSpec("cloudflare-sandbox-bridge.json", cloudflareBridgeSpec, nil)
}

// CloudflareContainersSpec returns the two operations of Cloudflare's
// account Containers API that reclaimer calls, as written out from
// Cloudflare's API reference (specs/README.md).
func CloudflareContainersSpec() (*openapi3.T, error) {
	return loadSpec("cloudflare-containers.json", cloudflareContainersSpec, nil)
}

// eachSchema calls f once for every schema the document holds: components,
// parameters, request bodies and responses, and everything nested.
func eachSchema(doc *openapi3.T, f func(*openapi3.Schema)) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil || seen[r.Value] {
			return
		}
		v := r.Value
		seen[v] = true
		f(v)
		for _, p := range v.Properties {
			walk(p)
		}
		for _, l := range [][]*openapi3.SchemaRef{v.AnyOf, v.OneOf, v.AllOf, v.PrefixItems} {
			for _, x := range l {
				walk(x)
			}
		}
		walk(v.Items)
		walk(v.Not)
		walk(v.AdditionalProperties.Schema)
	}
	content := func(c openapi3.Content) {
		for _, mt := range c {
			walk(mt.Schema)
		}
	}
	if doc.Components != nil {
		for _, s := range doc.Components.Schemas {
			walk(s)
		}
	}
	for _, p := range doc.Paths.Map() {
		for _, op := range p.Operations() {
			for _, par := range append(op.Parameters, p.Parameters...) {
				if par.Value != nil {
					walk(par.Value.Schema)
				}
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				content(op.RequestBody.Value.Content)
			}
			if op.Responses != nil {
				for _, r := range op.Responses.Map() {
					if r.Value != nil {
						content(r.Value.Content)
					}
				}
			}
		}
	}
}

// dropKeywords removes keys that are no JSON Schema keyword (a generator's
// metadata) from every schema.
func dropKeywords(doc *openapi3.T, keys ...string) {
	eachSchema(doc, func(s *openapi3.Schema) {
		for _, k := range keys {
			delete(s.Extensions, k)
		}
	})
}

// dropPatterns removes every pattern containing marker.
func dropPatterns(doc *openapi3.T, marker string) {
	eachSchema(doc, func(s *openapi3.Schema) {
		if strings.Contains(s.Pattern, marker) {
			s.Pattern = ""
		}
	})
}
