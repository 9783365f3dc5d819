package busy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func scan(t *testing.T, opts Options, roots ...string) *Snapshot {
	t.Helper()
	s, err := Scan(context.Background(), roots, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Processes == 0 {
		t.Fatal("no process looked at")
	}
	return s
}

// holdersOf returns pid's holders of root.
func holdersOf(s *Snapshot, root string, pid int) []Holder {
	var out []Holder
	for _, h := range s.Holders(root) {
		if h.PID == pid {
			out = append(out, h)
		}
	}
	return out
}

func whats(hs []Holder) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.What)
	}
	return out
}

func TestCwdMakesBusyUntilKilled(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "run1", "deep")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "run1")
	idle := filepath.Join(dir, "idle")
	if err := os.Mkdir(idle, 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("sleep", "30")
	cmd.Dir = sub
	c := start(t, cmd, false)

	s := scan(t, Options{}, root, idle)
	hs := holdersOf(s, root, c.pid())
	if len(hs) != 1 || hs[0].What != "cwd" || hs[0].Command != "sleep" || hs[0].Path != sub {
		t.Fatalf("holders of %s: %+v", root, s.Holders(root))
	}
	if !s.Busy(root) || s.Busy(idle) {
		t.Fatalf("busy(root)=%v busy(idle)=%v", s.Busy(root), s.Busy(idle))
	}
	if r := s.Reason(root); !strings.Contains(r, "cwd") || !strings.Contains(r, "sleep") {
		t.Fatalf("reason %q", r)
	}
	// The holder is listed under the path as the caller spelled it.
	if got := s.Holders(root + "/"); len(got) == 0 {
		t.Fatal("Holders does not clean its argument")
	}

	c.stop()
	s = scan(t, Options{}, root)
	if hs := holdersOf(s, root, c.pid()); len(hs) != 0 {
		t.Fatalf("killed child still holds %s: %+v", root, hs)
	}
}

func TestOpenFileMakesBusy(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "log.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := start(t, exec.Command("sh", "-c", `exec 3<"$1"; echo ready; exec sleep 30`, "sh", file), true)

	s := scan(t, Options{}, root)
	hs := holdersOf(s, root, c.pid())
	if !slices.ContainsFunc(hs, func(h Holder) bool { return h.What == "fd 3" && h.Path == file }) {
		t.Fatalf("want fd 3 on %s, got %+v", file, hs)
	}
	if slices.Contains(whats(hs), "cwd") {
		t.Fatalf("cwd is not in root: %+v", hs)
	}
}

func TestDeletedOpenFileCounts(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "gone")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := start(t, exec.Command("sh", "-c", `exec 3<"$1"; rm "$1"; echo ready; exec sleep 30`, "sh", file), true)
	if _, err := os.Lstat(file); !os.IsNotExist(err) {
		t.Fatalf("file still there: %v", err)
	}
	s := scan(t, Options{}, root)
	hs := holdersOf(s, root, c.pid())
	if len(hs) != 1 || hs[0].What != "fd 3" || hs[0].Path != file+" (deleted)" {
		t.Fatalf("want fd 3 on the deleted file, got %+v", hs)
	}
}

func TestSimilarPrefixNotConfused(t *testing.T) {
	dir := t.TempDir()
	run1, run10 := filepath.Join(dir, "run1"), filepath.Join(dir, "run10")
	for _, d := range []string{run1, run10} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sleep", "30")
	cmd.Dir = run10
	c := start(t, cmd, false)

	s := scan(t, Options{}, run1, run10, dir)
	if hs := holdersOf(s, run1, c.pid()); len(hs) != 0 {
		t.Fatalf("run1 confused with run10: %+v", hs)
	}
	if hs := holdersOf(s, run10, c.pid()); len(hs) != 1 {
		t.Fatalf("run10: %+v", hs)
	}
	// Nested roots both see it.
	if hs := holdersOf(s, dir, c.pid()); len(hs) != 1 {
		t.Fatalf("parent folder: %+v", hs)
	}
}

func TestMemoryMapMakesBusy(t *testing.T) {
	root := t.TempDir()
	// A copy of sleep run from inside root maps its own executable.
	bin, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(root, "mysleep")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	c := start(t, exec.Command(exe, "30"), false)
	s := scan(t, Options{}, root)
	// Start returned after exec, which maps the executable.
	hs := holdersOf(s, root, c.pid())
	if len(hs) != 1 || hs[0].What != "mmap" || hs[0].Path != exe {
		t.Fatalf("want one mmap of %s, got %+v", exe, hs)
	}
}

func TestChrootMakesBusy(t *testing.T) {
	root := t.TempDir()
	c := helper(t, "chroot", root)
	s := scan(t, Options{}, root)
	hs := holdersOf(s, root, c.pid())
	if got := whats(hs); !slices.Equal(got, []string{"root"}) {
		if len(hs) == 0 && os.Geteuid() != 0 {
			t.Skip("chroot needs root")
		}
		t.Fatalf("want only root, got %+v", hs)
	}
}

func TestThreadWithOwnCwd(t *testing.T) {
	root := t.TempDir()
	c := helper(t, "thread-cwd", root)
	s := scan(t, Options{}, root)
	hs := holdersOf(s, root, c.pid())
	if got := whats(hs); !slices.Equal(got, []string{"cwd"}) {
		t.Fatalf("want the thread's cwd, got %+v", hs)
	}
}

func TestExitedLeaderThreadsStillSeen(t *testing.T) {
	root := t.TempDir()
	c := helper(t, "leader-exit", root)
	// The main thread ends after it printed ready: wait for /proc to show
	// it (a state change, not a delay).
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", c.pid(), c.pid()))
		if err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("main thread did not end: %s", st)
		}
		runtime.Gosched()
	}
	if _, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", c.pid())); err == nil {
		t.Skip("the leader's cwd is still shown; nothing to test")
	}
	s := scan(t, Options{}, root)
	hs := holdersOf(s, root, c.pid())
	got := whats(hs)
	if !slices.Contains(got, "cwd") || !slices.ContainsFunc(got, func(w string) bool { return strings.HasPrefix(w, "fd ") }) {
		t.Fatalf("want cwd and fd through the live threads, got %+v", hs)
	}
}

func TestBindMountInOtherNamespace(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "run")
	alias := filepath.Join(dir, "alias")
	for _, d := range []string{filepath.Join(root, "w"), alias} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A private mount namespace sees root at alias; its cwd there reads
	// as alias/w, a path that does not exist outside.
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount --bind "$1" "$2" && cd "$2/w" && echo ready && exec sleep 30`, "sh", root, alias)
	cmd.Stderr = nil
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 6)
	if n, _ := stdout.Read(buf); string(buf[:n]) != "ready\n" {
		t.Skipf("a private mount namespace with a bind mount was refused (%q)", buf[:n])
	}
	s := scan(t, Options{}, root, alias)
	hs := holdersOf(s, root, cmd.Process.Pid)
	if len(hs) != 1 || hs[0].What != "cwd" || hs[0].Path != filepath.Join(alias, "w") {
		t.Fatalf("want cwd through the bind mount, got %+v", s.Holders(root))
	}
	// The empty folder alias in our namespace is not what it works in.
	if hs := holdersOf(s, alias, cmd.Process.Pid); len(hs) != 0 {
		t.Fatalf("alias: %+v", hs)
	}
}

func TestSelfExcluded(t *testing.T) {
	root := t.TempDir()
	f, err := os.Create(filepath.Join(root, "mine"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	self := os.Getpid()

	s := scan(t, Options{}, root)
	if hs := holdersOf(s, root, self); len(hs) != 0 {
		t.Fatalf("self not excluded: %+v", hs)
	}
	s = scan(t, Options{IncludeSelf: true}, root)
	hs := holdersOf(s, root, self)
	if len(hs) == 0 || !strings.HasPrefix(hs[0].What, "fd ") {
		t.Fatalf("IncludeSelf: %+v", hs)
	}
}

func TestPermissionDeniedIsCountedAndFailsClosed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a scan as another user")
	}
	// A folder this test's process (root) works in, scanned by an
	// unprivileged user who may not read root's /proc entries.
	dir := t.TempDir()
	root := filepath.Join(dir, "run")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.Dir = root
	start(t, cmd, false)

	// The test binary, copied where the other user may run it.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "busy.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	helperCmd := exec.Command(bin, "-test.run=^$")
	helperCmd.Env = append(os.Environ(), helperEnv+"=scan", helperEnv+"_DIR="+root)
	helperCmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := helperCmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scan as nobody: %v: %s", err, out)
	}
	var procs, denied, failed int
	var busy bool
	if _, err := fmt.Sscanf(string(out), "ready %d %d %d %t", &procs, &denied, &failed, &busy); err != nil {
		t.Fatalf("helper said %q: %v", out, err)
	}
	if procs == 0 || denied == 0 {
		t.Fatalf("as nobody: %d processes, %d denied", procs, denied)
	}
	if !busy {
		t.Fatal("nobody cannot read root's processes, yet answered not busy: unknown must be busy")
	}
}

func TestReasonsFitsAPlainFunction(t *testing.T) {
	root := t.TempDir()
	cmd := exec.Command("sleep", "30")
	cmd.Dir = root
	start(t, cmd, false)
	var f func(context.Context, []string) (map[string]string, error) = Options{}.Reasons
	got, err := f(context.Background(), []string{root, t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got[root], "cwd") {
		t.Fatalf("%v", got)
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Scan(ctx, []string{t.TempDir()}, Options{}); err == nil {
		t.Fatal("no error after cancel")
	}
	s, err := Scan(context.Background(), nil, Options{})
	if err != nil || s.Busy("/") {
		t.Fatal(s, err)
	}
}

func TestMatcher(t *testing.T) {
	m := newMatcher()
	m.add("/x/run1", 0)
	m.add("/x/run10", 1)
	m.add("/x/run1", 0)
	m.add("/y", 2)
	cases := []struct {
		path string
		want []int
	}{
		{"/x/run1", []int{0}},
		{"/x/run1/a/b", []int{0}},
		{"/x/run10/a", []int{1}},
		{"/x/run100", nil},
		{"/x/run1 (deleted)", []int{0}},
		{"/x/run1/f (deleted)", []int{0}},
		{"/x", nil},
		{"/", nil},
		{"/y", []int{2}},
		{"socket:[123]", nil},
		{"", nil},
	}
	for _, c := range cases {
		if got := m.match([]byte(c.path), nil); !slices.Equal(got, c.want) {
			t.Errorf("match(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	m.add("/", 3)
	if got := m.match([]byte("/x/run10/a"), nil); !slices.Equal(got, []int{3, 1}) {
		t.Errorf("with / root: %v", got)
	}
	// A root literally named "… (deleted)" matches its own path.
	m2 := newMatcher()
	m2.add("/x/a (deleted)", 0)
	if got := m2.match([]byte("/x/a (deleted)"), nil); !slices.Equal(got, []int{0}) {
		t.Errorf("root named deleted: %v", got)
	}
}

func TestMountTranslation(t *testing.T) {
	host := parseMountinfo([]byte(`26 1 254:0 / / rw - ext4 /dev/vda rw
30 26 0:50 / /tmp rw - tmpfs tmpfs rw
31 26 254:0 /srv/runs /mnt/runs rw - ext4 /dev/vda rw
32 26 254:0 /srv/runs/r1/ws /mnt/ws rw - ext4 /dev/vda rw
33 26 254:0 /srv/with\040space /mnt/sp rw - ext4 /dev/vda rw
`))
	if host[4].Root != "/srv/with space" {
		t.Fatalf("unescape: %q", host[4].Root)
	}
	k, ok := keyOf(host, "/srv/runs/r1")
	if !ok || k != (fsKey{"254:0", "/srv/runs/r1"}) {
		t.Fatalf("keyOf: %+v", k)
	}
	if k2, _ := keyOf(host, "/mnt/runs/r1"); k2 != k {
		t.Fatalf("keyOf through a bind mount: %+v", k2)
	}
	if k3, _ := keyOf(host, "/tmp/x"); k3 != (fsKey{"0:50", "/x"}) {
		t.Fatalf("keyOf tmpfs: %+v", k3)
	}
	got := aliases(host, k)
	want := []string{"/srv/runs/r1", "/mnt/runs/r1", "/mnt/ws"}
	if !slices.Equal(got, want) {
		t.Fatalf("aliases %v, want %v", got, want)
	}
	// A sandbox namespace that bound the workspace at /workspace.
	sandbox := parseMountinfo([]byte(`100 99 0:77 / / rw - overlay overlay rw
101 100 254:0 /srv/runs/r1 /workspace rw - ext4 /dev/vda rw
`))
	if got := aliases(sandbox, k); !slices.Equal(got, []string{"/workspace"}) {
		t.Fatalf("sandbox aliases %v", got)
	}
	if got := aliases(sandbox, fsKey{"254:0", "/srv/runs/r2"}); len(got) != 0 {
		t.Fatalf("r2 is not in the sandbox: %v", got)
	}
}

func TestMapsPath(t *testing.T) {
	cases := map[string]string{
		"7f00-7f01 r-xp 00000000 fe:00 1234    /usr/bin/sleep":             "/usr/bin/sleep",
		"7f00-7f01 rw-p 00000000 00:00 0 ":                                 "",
		"7f00-7f01 rw-p 00000000 00:00 0          [heap]":                  "[heap]",
		"7f00-7f01 r--p 00000000 fe:00 99   /a dir/with  spaces (deleted)": "/a dir/with  spaces (deleted)",
	}
	for line, want := range cases {
		if got := string(mapsPath([]byte(line))); got != want {
			t.Errorf("mapsPath(%q) = %q, want %q", line, got, want)
		}
	}
	if got := string(unescapeMapsPath([]byte(`/a\012b`))); got != "/a\nb" {
		t.Errorf("unescape %q", got)
	}
}
