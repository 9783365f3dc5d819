// Package diskusage reports how full the filesystem holding a path is, the
// way df(1) shows it: used / (used + available), where "available" is what
// an unprivileged user may still write (reserved blocks excluded), so a disk
// that df shows at 100 % reads 1.0 here even though root could still write.
//
// It calls statfs(2) and nothing else; it is safe for concurrent use.
package diskusage
