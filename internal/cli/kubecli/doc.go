// Package kubecli holds the end-to-end test of the command line against a
// real API server (internal/kubetest): a configuration with a
// [[kubernetes]] source, planned and applied by `reclaimer`, and an account
// missing a verb reported as a problem. It has no code of its own; it is a
// package of its own so that only its tests start a cluster.
package kubecli
