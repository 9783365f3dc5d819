// Package pgtest gives tests a real PostgreSQL: Debian's server binaries
// (initdb and postgres, found on PATH, in $RECLAIMER_PG_BIN, or in the
// newest /usr/lib/postgresql/N/bin), run in a temporary folder of their
// own, listening only on a Unix socket in that folder, never on TCP.
//
// One server per test package: the first NewDatabase starts it, and Main
// (called from the package's TestMain) stops it and removes its folder
// after the tests. Each NewDatabase is a fresh, empty database of that
// server, so tests running in parallel never see each other's rows.
//
// PostgreSQL refuses to run as root, and tests run as root here. As root,
// pgtest runs the server as the user nobody (present on every Debian
// system, so nothing is added to /etc/passwd), in a folder it chowns to
// nobody with mode 0700; trust authentication is safe because only nobody
// and root can reach a socket inside that folder. As another user, the
// server runs as that user. The server is started as a child with a
// parent-death signal, so a test binary killed with SIGKILL takes its
// server with it; a folder such a run left behind is removed by the next
// start. Durability is off (fsync, full_page_writes, synchronous_commit):
// a test database is thrown away, and this keeps a start near half a second.
//
// Without the binaries the tests that need a server skip with a message;
// with RECLAIMER_REQUIRE_POSTGRES=1 (as in CI) they fail instead.
//
// Proxy puts a socket between a client and the server that a test can
// pause (a partition: bytes stop flowing, connections hang) or cut (the
// connections drop), to see what a store or elector does when PostgreSQL
// cannot be reached.
package pgtest
