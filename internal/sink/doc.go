// Package sink stores the objects of archives: a local folder (Local) or an
// S3-compatible bucket (S3, through minio-go). The archive package writes
// through a Sink and reads every object back from it before a runtime is
// touched (DESIGN §4), so a Sink only has to store bytes faithfully or fail.
//
// # Names
//
// Objects are named by slash-separated relative keys such as
// "worktree/repo:feature/20260101T120000Z.bundle". CheckName refuses
// absolute names, "." and ".." segments, empty segments, backslashes and NUL
// bytes, so a name can never leave the sink's folder or prefix. S3 puts its
// configured prefix in front of every name.
//
// # Contract
//
//   - Put streams: memory does not grow with the size of what is stored
//     (Local copies through one 256 KiB buffer; S3 uploads in parts of
//     PartSize, one buffer at a time). An object appears whole or not at
//     all: Local writes a temporary file beside it, fsyncs and renames; S3
//     completes a multipart upload only after its last part, and aborts it
//     on error. Putting a name again replaces the object.
//   - Open returns ErrNotFound (wrapped) for a missing object; Remove of a
//     missing object succeeds, so removal is idempotent.
//   - Check tells, before anything is written, whether the sink can be
//     used: the folder can be created, the bucket is reachable and exists.
//   - Every S3 request is bounded by progress, not only per call (rule "a
//     transfer that does not move ends"): it must move StallBytes in every
//     StallTimeout, sent or received, or it fails wrapping ErrStalled.
//
// Errors are wrapped as "verb object NAME: %w" and name the sink (its URL),
// so a failed pass says where it could not write. All methods are safe for
// concurrent use.
package sink
