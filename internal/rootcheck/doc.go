// Package rootcheck decides which folders may be managed roots: the places
// reclaimer renames into its trash and deletes from.
//
// Resolve turns a configured path into the one the kernel reaches (every
// symbolic link resolved, for the part that exists; the rest appended as
// written), once, when the configuration is loaded: after that, everything
// acts only under the resolved path with the link-refusing walker
// (internal/beneath). Check refuses "/" and the system folders (/bin, /etc,
// /usr, /home itself, ...). Both are pure functions of the filesystem's
// state; they keep no state and are safe for concurrent use.
package rootcheck
