// Package fleet holds the end-to-end tests of a fleet: several `reclaimer
// serve` processes against one real PostgreSQL (package pgtest) and one
// E2B contract fake (package fakes), each with a local source of its own.
// It has no code of its own: what it tests is the daemon (package
// server), the application layer's leadership gates (ops, engine) and the
// elector (leader), as an operator runs them.
//
// The replicas are this test binary run again with the command line of
// `reclaimer serve` (cli.Run, exactly what cmd/reclaimer does), so they
// are separate processes that can be killed (SIGKILL), stopped (SIGSTOP)
// and cut off PostgreSQL (a pgtest.Proxy between one replica and the
// server).
package fleet
