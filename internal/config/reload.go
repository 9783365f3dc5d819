package config

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrUnsafeReload is matched by CheckReload's refusals.
var ErrUnsafeReload = errors.New("refusing to reload")

// CheckReload refuses to replace old with next when next would drop every
// source old had (a file truncated to zero bytes parses as the defaults),
// or moves the archives or the ledger: archives already written would no
// longer be found, pruned or restored, and the ledger's records would be
// lost to the running daemon. Such changes take a restart, on purpose.
func CheckReload(old, next *Config) error {
	var why []error
	if len(old.Sources) > 0 && len(next.Sources) == 0 {
		why = append(why, fmt.Errorf("%w: it has no sources (it had %d): a truncated or emptied file?", ErrUnsafeReload, len(old.Sources)))
	}
	if old.Archive.Dir != next.Archive.Dir || !reflect.DeepEqual(old.Archive.S3, next.Archive.S3) {
		why = append(why, fmt.Errorf("%w: it changes where archives are kept (archive.dir %q → %q, archive.s3): restart to move them", ErrUnsafeReload, old.Archive.Dir, next.Archive.Dir))
	}
	if old.Ledger.Path != next.Ledger.Path {
		why = append(why, fmt.Errorf("%w: it changes ledger.path (%q → %q): restart to use another ledger", ErrUnsafeReload, old.Ledger.Path, next.Ledger.Path))
	}
	if old.Ledger.URL != next.Ledger.URL || old.Ledger.PasswordFile != next.Ledger.PasswordFile {
		why = append(why, fmt.Errorf("%w: it changes ledger.url or ledger.password_file: restart to use another ledger", ErrUnsafeReload))
	}
	if old.ReplicaName() != next.ReplicaName() {
		why = append(why, fmt.Errorf("%w: it changes server.name (%q → %q): restart to rename the replica", ErrUnsafeReload, old.ReplicaName(), next.ReplicaName()))
	}
	return errors.Join(why...)
}
