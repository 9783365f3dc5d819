package openapi

// The server interface, models and client come from api/openapi.yaml; the
// stamp records which version of it they were made from (a test compares).
//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config cfg.yaml ../../api/openapi.yaml
//go:generate sh -c "sha256sum ../../api/openapi.yaml | cut -c1-64 > spec.sha256"
