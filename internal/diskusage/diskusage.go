package diskusage

import (
	"fmt"
	"math/bits"

	"golang.org/x/sys/unix"
)

// Usage is a snapshot of one filesystem's space and inodes.
type Usage struct {
	Path       string `json:"path"`
	TotalBytes uint64 `json:"total_bytes"`
	UsedBytes  uint64 `json:"used_bytes"`
	AvailBytes uint64 `json:"avail_bytes"` // free to unprivileged users
	// Fraction is UsedBytes / (UsedBytes + AvailBytes), 0 for an empty
	// filesystem; df's Use% is this, rounded up.
	Fraction    float64 `json:"fraction"`
	InodesTotal uint64  `json:"inodes_total"`
	InodesFree  uint64  `json:"inodes_free"`
	// InodeFraction is the share of inodes in use; 0 where the filesystem
	// has no fixed inode count (btrfs, some FUSE filesystems).
	InodeFraction float64 `json:"inode_fraction"`
	// FSID tells filesystems apart, so paths on the same one are measured
	// once.
	FSID [2]int32 `json:"-"`
}

// Of measures the filesystem holding path.
func Of(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %q: %w", path, err)
	}
	return fromStatfs(path, &st), nil
}

func fromStatfs(path string, st *unix.Statfs_t) Usage {
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	u := Usage{
		Path:        path,
		TotalBytes:  st.Blocks * unit,
		UsedBytes:   (st.Blocks - st.Bfree) * unit,
		AvailBytes:  st.Bavail * unit,
		InodesTotal: st.Files,
		InodesFree:  st.Ffree,
		FSID:        st.Fsid.Val,
	}
	if d := u.UsedBytes + u.AvailBytes; d > 0 {
		u.Fraction = float64(u.UsedBytes) / float64(d)
	}
	if st.Files > 0 {
		u.InodeFraction = float64(st.Files-st.Ffree) / float64(st.Files)
	}
	return u
}

// Percent is df's Use%: the fraction in percent, rounded up.
func (u Usage) Percent() int {
	d := u.UsedBytes + u.AvailBytes
	if d == 0 {
		return 0
	}
	// 128-bit arithmetic: used*100 overflows 64 bits past 164 PiB.
	hi, lo := bits.Mul64(u.UsedBytes, 100)
	lo, carry := bits.Add64(lo, d-1, 0)
	q, _ := bits.Div64(hi+carry, lo, d)
	return int(q)
}
