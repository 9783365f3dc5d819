// Package dockerclient is reclaimer's one door to the Docker Engine: a thin
// wrapper around github.com/moby/moby/client exposing only what the docker
// backend needs (list, inspect, stop, remove, events, the data root), in
// reclaimer's own types, and counting every HTTP request it makes so that
// a pass can be measured in Engine calls.
//
// The socket comes from DOCKER_HOST (and DOCKER_TLS_VERIFY, DOCKER_CERT_PATH,
// DOCKER_API_VERSION) or the platform default; the API version is
// negotiated on the first call (one extra request, counted).
//
// Reading never changes a container: List and Inspect are plain GETs, so
// observing a container is never activity. A Client is safe for concurrent
// use. Errors wrap the Engine's; IsNotFound tells a container that is gone.
package dockerclient
