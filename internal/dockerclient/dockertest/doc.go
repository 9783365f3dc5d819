// Package dockertest gives tests a real Docker Engine: a client that
// skips (or, with RECLAIMER_REQUIRE_DOCKER=1, fails) when no Engine
// answers, a test image built offline from a static helper program
// (cached by the hash of its source, so only its first use builds it),
// and containers that carry a label unique to the test run and are removed
// when the test ends, together with the leftovers of killed earlier runs
// of the same test. It never touches a container without its own label.
package dockertest
