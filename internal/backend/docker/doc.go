// Package docker is the "docker" backend: every container of the Docker
// Engine that its label selector matches is one runtime, named by the
// container's name. Its files are the host sources of its bind mounts; the
// mount at the configured home path is its home, those at the workspace
// paths its workspaces. Only sources inside the configured roots are ever
// touched, and of those only the ones under the root that holds the home
// (else the first workspace): a runtime's managed folders lie under one
// root, whose trash receives them. A caller's checkout mounted from
// elsewhere is listed but never shed, archived or removed.
//
// Roles: Lister, Suspender (stop), Deleter (remove the container, then
// discard its managed folders that no other container mounts), FileReclaimer
// (caches of the home and core dumps while the container is not running;
// git-ignored dependencies of its workspaces), Exporter (a verified tar.zst
// of each managed workspace, dependencies left out), Restorer, Locker
// (re-inspects) and Watcher (die and stop events).
//
// Sharing: whether a host folder is shared is judged against every
// container of the Engine, matched or not. A stopped container whose
// managed folder (or a folder inside or around it) is mounted by a running
// container is reported busy, so nothing of it is touched until all are
// stopped; removing a container never discards a folder another container
// mounts.
//
// Unowned folders: a direct child folder of a root (not hidden, not a link,
// not a mount point) that holds, and lies in, no bind source of any
// container is a runtime of its own with the state "unowned" and the ID
// "unowned:" followed by its path. It is treated like a stopped run folder:
// last activity is its newest file change, it sheds core dumps and ignored
// dependencies, and retention archives it (a verified tar.zst) and discards
// it. A container's folders left behind (its runtime folder emptied of the
// mounts, or kept after a crash) are reclaimed this way.
//
// Engine calls: a listing is one request for every container (with mounts,
// labels and state); a full observation adds one inspection per container
// (start and finish times, the writable layer's folder, which is then
// walked: the Engine's own size measure is slow on some storage drivers).
// Observing named containers (apply's re-observations) inspects each and,
// when one is stopped with managed folders, lists only the active
// containers for the sharing check. Reading never changes a container.
//
// Activity: the container's last start or finish, else its creation; the
// engine adds what the ledger recorded. A running container's CreatedAt is
// the start of its current run, so max_lifetime caps a run, not the age of
// a container that was resumed. A start between plan and apply
// changes either the state or the last activity and skips the action.
package docker
