// Package rundir is the "dir" backend: every direct child folder of a
// configured root is one runtime (a run folder), with an optional home and
// workspaces at fixed subpaths.
//
// Roles: Lister, FileReclaimer (caches of the home, core dumps, git-ignored
// dependencies of the workspaces), Exporter (a verified tar.zst of the run
// folder, ignored dependencies left out), Deleter (the folder goes into the
// root's trash), Restorer (extracts the archive back). A run folder has no
// process of its own: the engine's /proc scan says when it is busy, and it
// is otherwise stopped.
//
// Hidden children (names starting with a dot, the trash among them),
// symbolic links and mount points are never runtimes.
package rundir
