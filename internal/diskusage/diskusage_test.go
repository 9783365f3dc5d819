package diskusage_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/diskusage"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// df runs df on path with the given output columns and returns its values
// (header skipped), in bytes where a size is asked for.
func df(t *testing.T, path string, columns string) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("df", "-B1", "--output="+columns, path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		t.Fatalf("df %s: %v\n%s", path, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("unexpected df output %q", stdout.String())
	}
	return strings.Fields(lines[1])
}

func dfPercent(t *testing.T, path string) int {
	t.Helper()
	v := df(t, path, "pcent")
	n, err := strconv.Atoi(strings.TrimSuffix(v[0], "%"))
	if err != nil {
		t.Fatalf("unexpected df pcent %q", v[0])
	}
	return n
}

// fromStatfs computes what Of must report from the raw statfs numbers.
func fromStatfs(t *testing.T, path string) diskusage.Usage {
	t.Helper()
	var st unix.Statfs_t
	must(t, unix.Statfs(path, &st))
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	u := diskusage.Usage{
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

func of(t *testing.T, path string) diskusage.Usage {
	t.Helper()
	u, err := diskusage.Of(path)
	if err != nil {
		t.Fatalf("Of(%q): %v", path, err)
	}
	return u
}

// writeZeros appends n bytes to path and syncs them.
func writeZeros(t *testing.T, path string, n int) error {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(t, err)
	defer f.Close()
	_, err = f.Write(make([]byte, n))
	return err
}

// On an 8 MiB tmpfs (nothing else writes there, so statfs, Of and df see
// the same numbers): empty, one block, half, half and a block, full.
func TestOfTmpfs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnt")
	testtree.MountTmpfs(t, dir, "size=8m")
	file := filepath.Join(dir, "data")

	check := func(stage string, wantFraction float64, wantPercent int) diskusage.Usage {
		t.Helper()
		u := of(t, dir)
		want := fromStatfs(t, dir)
		if u != want {
			t.Errorf("%s: Of = %+v, statfs gives %+v", stage, u, want)
		}
		if u.TotalBytes != 8<<20 {
			t.Errorf("%s: TotalBytes = %d, want 8 MiB", stage, u.TotalBytes)
		}
		if u.UsedBytes+u.AvailBytes != u.TotalBytes {
			t.Errorf("%s: used %d + avail %d != total %d on a tmpfs (no reserved blocks)", stage, u.UsedBytes, u.AvailBytes, u.TotalBytes)
		}
		if u.Fraction != wantFraction {
			t.Errorf("%s: Fraction = %v, want %v", stage, u.Fraction, wantFraction)
		}
		if got := u.Percent(); got != wantPercent {
			t.Errorf("%s: Percent = %d, want %d", stage, got, wantPercent)
		}
		if got := dfPercent(t, dir); got != u.Percent() {
			t.Errorf("%s: df says %d%%, Percent says %d%%", stage, got, u.Percent())
		}
		if v := df(t, dir, "used,avail"); v[0] != strconv.FormatUint(u.UsedBytes, 10) || v[1] != strconv.FormatUint(u.AvailBytes, 10) {
			t.Errorf("%s: df says used %s avail %s, Of says %d %d", stage, v[0], v[1], u.UsedBytes, u.AvailBytes)
		}
		return u
	}

	empty := check("empty", 0, 0)
	if empty.UsedBytes != 0 || empty.AvailBytes != 8<<20 {
		t.Errorf("empty tmpfs: used %d avail %d", empty.UsedBytes, empty.AvailBytes)
	}
	if empty.Path != dir {
		t.Errorf("Path = %q, want %q", empty.Path, dir)
	}

	// One 4 KiB page of 2,048: 0.05 %, which df rounds up to 1 %.
	must(t, writeZeros(t, file, 4096))
	check("one page", 4096.0/(8<<20), 1)

	must(t, os.Truncate(file, 0))
	must(t, writeZeros(t, file, 4<<20))
	check("4 MiB", 0.5, 50)

	must(t, writeZeros(t, file, 4096))
	check("4 MiB + 1 page", float64(4<<20+4096)/(8<<20), 51)

	// Fill to ENOSPC.
	var err error
	for err == nil {
		err = writeZeros(t, file, 1<<20)
	}
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("filling the tmpfs stopped with %v, want ENOSPC", err)
	}
	full := check("full", 1.0, 100)
	if full.AvailBytes != 0 {
		t.Errorf("full: AvailBytes = %d", full.AvailBytes)
	}
}

// Inode counts on a tmpfs with a small fixed number of inodes.
func TestOfTmpfsInodes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnt")
	testtree.MountTmpfs(t, dir, "size=1m,nr_inodes=64")
	u := of(t, dir)
	if u.InodesTotal != 64 || u.InodesFree != 63 { // the root uses one
		t.Errorf("InodesTotal %d InodesFree %d, want 64 and 63", u.InodesTotal, u.InodesFree)
	}
	if u.InodeFraction != 1.0/64 {
		t.Errorf("InodeFraction = %v, want 1/64", u.InodeFraction)
	}
	var err error
	for i := 0; err == nil; i++ {
		var f *os.File
		f, err = os.Create(filepath.Join(dir, "f"+strconv.Itoa(i)))
		if err == nil {
			f.Close()
		}
	}
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("creating files stopped with %v, want ENOSPC", err)
	}
	u = of(t, dir)
	if u.InodesFree != 0 || u.InodeFraction != 1.0 {
		t.Errorf("no inodes left: InodesFree %d InodeFraction %v, want 0 and 1", u.InodesFree, u.InodeFraction)
	}
	if u.Fraction >= 0.5 {
		t.Errorf("byte Fraction %v: empty files use no blocks", u.Fraction)
	}
}

// On the shared disk, Of agrees with df within 64 MiB (others write there).
func TestOfMatchesDf(t *testing.T) {
	dir := t.TempDir()
	u := of(t, dir)
	v := df(t, dir, "size,used,avail")
	const slack = 64 << 20
	for i, got := range []uint64{u.TotalBytes, u.UsedBytes, u.AvailBytes} {
		want, err := strconv.ParseUint(v[i], 10, 64)
		must(t, err)
		diff := int64(got) - int64(want)
		if diff < -slack || diff > slack {
			t.Errorf("%s: Of says %d, df says %d", []string{"size", "used", "avail"}[i], got, want)
		}
	}
	if u.Fraction <= 0 || u.Fraction >= 1 {
		t.Errorf("Fraction = %v on the test disk", u.Fraction)
	}
	if p := dfPercent(t, dir); u.Percent() < p-1 || u.Percent() > p+1 {
		t.Errorf("Percent = %d, df says %d%%", u.Percent(), p)
	}
	// A file's path measures its filesystem too.
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	if f := of(t, filepath.Join(dir, "f")); f.FSID != u.FSID || f.TotalBytes != u.TotalBytes {
		t.Errorf("Of(file) = %+v, Of(dir) = %+v", f, u)
	}
}

// FSID tells filesystems apart: the same for a folder and a bind mount of
// the same filesystem, different for a tmpfs.
func TestOfFSID(t *testing.T) {
	base := t.TempDir()
	must(t, os.Mkdir(filepath.Join(base, "src"), 0o755))
	testtree.MountTmpfs(t, filepath.Join(base, "tmp"), "size=1m")
	testtree.BindMount(t, filepath.Join(base, "src"), filepath.Join(base, "bind"))
	disk := of(t, base)
	tmp := of(t, filepath.Join(base, "tmp"))
	bind := of(t, filepath.Join(base, "bind"))
	if disk.FSID == tmp.FSID {
		t.Errorf("the disk and a tmpfs share FSID %v", disk.FSID)
	}
	if bind.FSID != disk.FSID {
		t.Errorf("a bind mount of the disk has FSID %v, the disk %v", bind.FSID, disk.FSID)
	}
	if tmp.TotalBytes != 1<<20 {
		t.Errorf("tmpfs TotalBytes = %d, want 1 MiB", tmp.TotalBytes)
	}
}

func TestOfMissingPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "deeper")
	u, err := diskusage.Of(path)
	if err == nil {
		t.Fatalf("Of(%q) = %+v, want an error", path, u)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Of(%q) error %v does not wrap ErrNotExist", path, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("Of error %q does not name %q", err, path)
	}
	if u != (diskusage.Usage{}) {
		t.Errorf("Of on error returned %+v, want the zero Usage", u)
	}
}

// Percent rounds up like df, and never divides by zero.
func TestPercent(t *testing.T) {
	for _, c := range []struct {
		used, avail uint64
		want        int
	}{
		{0, 0, 0},
		{0, 100, 0},
		{1, 999, 1},
		{50, 50, 50},
		{501, 499, 51},
		{999, 1, 100},
		{100, 0, 100},
		// Realistic sizes: 16 TiB used, 1 byte free.
		{16 << 40, 1, 100},
		{8 << 40, 8 << 40, 50},
	} {
		u := diskusage.Usage{UsedBytes: c.used, AvailBytes: c.avail}
		if got := u.Percent(); got != c.want {
			t.Errorf("Percent(used %d, avail %d) = %d, want %d", c.used, c.avail, got, c.want)
		}
	}
}

// Percent must not overflow on filesystems larger than 2^64/100 bytes
// (about 164 PiB), which large Lustre or Ceph clusters and some FUSE
// mounts of object stores report. df computes these right.
func TestPercentHugeFilesystem(t *testing.T) {
	for _, c := range []struct {
		used, avail uint64
		want        int
	}{
		{1 << 60, 1 << 60, 50},       // 1 EiB used of 2
		{200 << 50, 800 << 50, 20},   // 200 PiB of 1,000
		{1<<63 - 1, 1, 100},          // all but one byte
		{1 << 58, 3 * (1 << 58), 25}, // 256 PiB of 1 EiB
	} {
		u := diskusage.Usage{UsedBytes: c.used, AvailBytes: c.avail}
		u.Fraction = float64(c.used) / float64(c.used+c.avail)
		if got := u.Percent(); got != c.want {
			t.Errorf("Percent(used %d, avail %d) = %d, want %d (Fraction %.4f)", c.used, c.avail, got, c.want, u.Fraction)
		}
	}
}
