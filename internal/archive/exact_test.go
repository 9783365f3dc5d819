package archive

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestRestoreIsExact: a tar round trip keeps owner and group (as root),
// mode, modification times, user.* attributes and file capabilities, the
// holes of a sparse file and FIFOs: `stat` (type, mode, owner, size,
// allocated blocks, mtime) and `getfattr` of every entry are the same
// before and after, and `diff -r` finds nothing.
func TestRestoreIsExact(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files another owner")
	}
	for _, tool := range []string{"getfattr", "stat", "diff"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install attr)", tool)
		}
	}
	base := t.TempDir()
	src := filepath.Join(base, "ws")
	testtree.Write(t, filepath.Join(src, "owned", "notes.md"), "mine\n")
	testtree.Write(t, filepath.Join(src, "bin", "tool"), "#!/bin/sh\n")
	must(t, os.Chmod(filepath.Join(src, "bin", "tool"), 0o750))
	must(t, os.Chmod(filepath.Join(src, "owned"), 0o2770))
	// A sparse file: 64 MiB with two small extents of data.
	sparse := filepath.Join(src, "disk.img")
	f, err := os.Create(sparse)
	must(t, err)
	_, err = f.WriteAt([]byte("head"), 0)
	must(t, err)
	_, err = f.WriteAt([]byte("middle"), 32<<20)
	must(t, err)
	must(t, f.Truncate(64<<20))
	must(t, f.Close())
	must(t, unix.Mkfifo(filepath.Join(src, "owned", "pipe"), 0o620))
	must(t, os.Symlink("notes.md", filepath.Join(src, "owned", "link")))
	for _, p := range []string{"owned", "owned/notes.md", "owned/pipe", "bin/tool", "disk.img"} {
		must(t, os.Chown(filepath.Join(src, p), 1000, 1000))
	}
	must(t, os.Lchown(filepath.Join(src, "owned", "link"), 1001, 1002))
	if err := unix.Setxattr(filepath.Join(src, "owned", "notes.md"), "user.origin", []byte("agent\x00binary"), 0); err != nil {
		t.Skipf("this filesystem refuses user.* attributes: %v", err)
	}
	must(t, unix.Setxattr(filepath.Join(src, "owned"), "user.dir", []byte("d"), 0))
	// cap_net_bind_service=ep, as setcap writes it (VFS_CAP_REVISION_2).
	capv2 := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	must(t, unix.Setxattr(filepath.Join(src, "bin", "tool"), "security.capability", capv2, 0))
	var st unix.Stat_t
	must(t, unix.Stat(sparse, &st))
	if st.Blocks*512 >= 1<<20 {
		t.Skipf("this filesystem does not keep holes (%d blocks)", st.Blocks)
	}
	testtree.Age(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), src)
	must(t, unix.Lutimes(filepath.Join(src, "owned", "link"), []unix.Timeval{{Sec: 1e9}, {Sec: 1e9}}))

	before := describe(t, src)
	out := filepath.Join(base, "ws.tar.zst")
	_, stats, err := WriteTarFile(testtree.Context(t), src, out, TarOptions{})
	must(t, err)
	must(t, VerifyTar(testtree.Context(t), out, stats.Entries))
	dest := filepath.Join(base, "restored")
	must(t, ExtractTar(testtree.Context(t), out, dest))
	if after := describe(t, dest); after != before {
		t.Errorf("restored tree differs\n before:\n%s\n after:\n%s", before, after)
	}
	// diff reports FIFOs as such whatever they are; stat compared them.
	if out, err := exec.Command("diff", "-r", "--no-dereference", "--exclude=pipe", src, dest).CombinedOutput(); err != nil {
		t.Errorf("diff -r: %v\n%s", err, out)
	}
}

// describe is stat and getfattr of every entry, with paths relative to dir.
func describe(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	must(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			names = append(names, p)
		}
		return err
	}))
	args := append([]string{"-c", "%n %F %a %u:%g %s %b %Y"}, names...)
	statOut, err := exec.Command("stat", args...).Output()
	must(t, err)
	attrOut, err := exec.Command("getfattr", append([]string{"-h", "-d", "-m", "-", "-e", "hex", "--absolute-names"}, names...)...).Output()
	must(t, err)
	return strings.ReplaceAll(string(statOut)+string(attrOut), dir, ".")
}
