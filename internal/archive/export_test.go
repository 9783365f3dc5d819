package archive

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// sinkCase is a sink to run a round trip against, and how to damage one of
// its stored objects behind its back.
type sinkCase struct {
	name    string
	sink    sink.Sink
	corrupt func(t *testing.T, name string)
	empty   func(t *testing.T) bool // nothing stored
}

func localSink(t *testing.T) sinkCase {
	root := filepath.Join(t.TempDir(), "archives")
	s, err := sink.NewLocal(root)
	must(t, err)
	return sinkCase{
		name: "local", sink: s,
		corrupt: func(t *testing.T, name string) { flipByte(t, filepath.Join(root, name)) },
		empty: func(t *testing.T) bool {
			n := 0
			filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() {
					n++
				}
				return nil
			})
			return n == 0
		},
	}
}

func s3Sink(t *testing.T) sinkCase {
	srv := testtree.StartS3(t)
	srv.MakeBucket(t, "archives")
	s, err := sink.NewS3(sink.S3Options{Endpoint: srv.Endpoint, Bucket: "archives", Prefix: "team/host",
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, PartSize: 5 << 20})
	must(t, err)
	bucketDir := filepath.Join(srv.Root, "archives")
	return sinkCase{
		name: "s3", sink: s,
		corrupt: func(t *testing.T, name string) { flipByte(t, srv.ObjectPath("archives", "team/host/"+name)) },
		empty: func(t *testing.T) bool {
			n := 0
			filepath.Walk(bucketDir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() && !strings.HasPrefix(fi.Name(), ".") {
					n++
				}
				return nil
			})
			return n == 0
		},
	}
}

var sinkCases = []func(t *testing.T) sinkCase{localSink, s3Sink}

func flipByte(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, 100)
	must(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, 100)
	must(t, err)
}

// fingerprint of a tree as a restore must bring it back: sockets and fifos
// are never stored.
func restorable(t *testing.T, root string, drop ...string) string {
	return dropLines(testtree.Fingerprint(t, root), append([]string{"fifo", "sock"}, drop...)...)
}

func request(s sink.Sink, base string) Request {
	return Request{Sink: s, Base: base, Runtime: "run-1", Backend: "dir", Conversations: []string{"conv-9"},
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// TestExportFoldersRoundTrip: a folder archived to each sink, read back,
// removed and restored is the same tree byte for byte (modes, symbolic
// links, hard links, empty folders, odd names), less the dependency
// folders unless include_dependencies keeps them.
func TestExportFoldersRoundTrip(t *testing.T) {
	for _, mk := range sinkCases {
		sc := mk(t)
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			src := filepath.Join(t.TempDir(), "run")
			layTree(t, src, 1<<20)
			write(t, filepath.Join(src, "package-lock.json"), "{}\n", 0o644)
			deps := []string{filepath.Join(src, "node_modules")}
			want := restorable(t, src, "node_modules")
			wantAll := restorable(t, src)

			m, err := ExportFolders(ctx, request(sc.sink, "dir/run-1/20260102T030405Z"), []Folder{{Name: "run", Path: src, Dependencies: deps}})
			must(t, err)
			if !slices.Equal(m.Formats, []string{KindTar}) || len(m.Objects) != 1 || m.Objects[0].Name != "dir/run-1/20260102T030405Z.run.tar.zst" {
				t.Fatalf("manifest objects: %+v %+v", m.Formats, m.Objects)
			}
			if len(m.Dependencies) != 1 || m.Dependencies[0].Path != "node_modules" || m.Dependencies[0].Kept ||
				!slices.Equal(m.Dependencies[0].LockFiles, []string{"package-lock.json"}) {
				t.Fatalf("dependencies: %+v", m.Dependencies)
			}
			survives := strings.Join(m.Survives, "; ")
			if !strings.Contains(survives, "run/node_modules NOT kept (rebuildable, listed in the manifest with their lock files)") ||
				!strings.Contains(survives, "run ("+src+"):") {
				t.Fatalf("survives: %s", survives)
			}
			if m.Location != sc.sink.URL("dir/run-1/20260102T030405Z.manifest.json") || m.Bytes != m.Objects[0].Bytes ||
				!slices.Equal(m.Conversations, []string{"conv-9"}) {
				t.Fatalf("manifest: %+v", m)
			}
			stored, err := ReadManifestFrom(ctx, sc.sink, ManifestName("dir/run-1/20260102T030405Z"))
			must(t, err)
			if stored.Location != m.Location || len(stored.Objects) != 1 || stored.Objects[0] != m.Objects[0] {
				t.Fatalf("stored manifest differs: %+v", stored)
			}

			// Remove, then restore where it was.
			must(t, os.Rename(src, src+".gone"))
			must(t, RestoreFolders(ctx, sc.sink, m, map[string]string{"run": src}))
			if got := restorable(t, src); got != want {
				t.Fatalf("restored tree differs:\n%s\nwant:\n%s", got, want)
			}
			// A second restore into the same place is refused, and harms nothing.
			if err := RestoreFolders(ctx, sc.sink, m, map[string]string{"run": src}); !errors.Is(err, os.ErrExist) {
				t.Fatalf("restore over a tree: %v", err)
			}

			// include_dependencies keeps them.
			req := request(sc.sink, "dir/run-1/20260102T030406Z")
			req.IncludeDependencies = true
			m2, err := ExportFolders(ctx, req, []Folder{{Name: "run", Path: src + ".gone", Dependencies: []string{filepath.Join(src+".gone", "node_modules")}}})
			must(t, err)
			if !m2.Dependencies[0].Kept || !strings.Contains(strings.Join(m2.Survives, ";"), "kept (include_dependencies = true)") {
				t.Fatalf("include_dependencies: %+v", m2)
			}
			dest := filepath.Join(t.TempDir(), "again")
			must(t, RestoreFolders(ctx, sc.sink, m2, map[string]string{"run": dest}))
			if got := restorable(t, dest); got != wantAll {
				t.Fatalf("restored tree with dependencies differs:\n%s\nwant:\n%s", got, wantAll)
			}
		})
	}
}

// TestExportWorktreeRoundTrip: a worktree with every kind of unsaved work,
// archived to each sink as a bundle and a patch, removed with its branch
// and snapshot ref, comes back from the sink alone: same status, same
// files; and the patch applied to the base commit gives the same files.
func TestExportWorktreeRoundTrip(t *testing.T) {
	for _, mk := range sinkCases {
		sc := mk(t)
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newRepo(t)
			dirty(t, f.wt)
			write(t, filepath.Join(f.wt, "package.json"), "{}\n", 0o644)
			before := stateOf(t, f.wt)
			content := contentOf(t, f.wt)
			base := git(t, f.repo, "rev-parse", "main")
			r := gitcmd.Runner{}
			ref := SnapshotRefPrefix + "feature/1"
			req := request(sc.sink, "worktree/repo:feature/20260102T030405Z")
			req.Backend, req.Runtime = "worktree", "repo:feature"
			m, err := ExportWorktree(ctx, r, req, Worktree{Path: f.wt, Repo: f.repo, Ref: ref,
				Dependencies: []string{filepath.Join(f.wt, "node_modules")}})
			must(t, err)
			if after := stateOf(t, f.wt); after.status != before.status || !slices.Equal(after.index, before.index) {
				t.Fatal("exporting changed the worktree")
			}
			// The ignored .env is kept too (a tar of just it); node_modules is not.
			if !slices.Equal(m.Formats, []string{KindBundle, KindPatch, KindTar}) || m.Base != base || m.Branch != "feature" ||
				m.Remote != f.remote || m.Snapshot == "" || m.SnapshotRef != ref || m.Repo != f.repo {
				t.Fatalf("manifest: %+v", m)
			}
			survives := strings.Join(m.Survives, "; ")
			for _, want := range []string{"branch feature with 2 commits not on any remote", "uncommitted changes to 4 files",
				"untracked files", "node_modules NOT kept (rebuildable, listed in the manifest with their lock files)",
				"ignored files that are not dependencies (.env): 1 file",
				"a patch of all of it against base " + base[:12]} {
				if !strings.Contains(survives, want) {
					t.Errorf("survives lacks %q: %s", want, survives)
				}
			}
			if len(m.Dependencies) != 1 || !slices.Equal(m.Dependencies[0].LockFiles, []string{"package.json"}) {
				t.Errorf("dependencies: %+v", m.Dependencies)
			}

			// The patch against the base gives the work back in a clean clone.
			patchDir := t.TempDir()
			patchFile := filepath.Join(patchDir, "p.patch")
			rc, err := sc.sink.Open(ctx, "worktree/repo:feature/20260102T030405Z.patch")
			must(t, err)
			out, err := os.Create(patchFile)
			must(t, err)
			_, err = io.Copy(out, rc)
			rc.Close()
			out.Close()
			must(t, err)
			clone := filepath.Join(patchDir, "clone")
			git(t, patchDir, "clone", "-q", f.remote, clone)
			git(t, clone, "checkout", "-q", base)
			git(t, clone, "apply", "--binary", patchFile)
			if got := contentOf(t, clone); got != content {
				t.Errorf("base + patch differs:\n%s\nwant:\n%s", got, content)
			}

			// Remove the worktree, its branch and the snapshot ref: only the
			// sink has them now.
			git(t, f.repo, "worktree", "remove", "--force", f.wt)
			git(t, f.repo, "branch", "-D", "feature")
			git(t, f.repo, "update-ref", "-d", ref)
			got, err := RestoreWorktreeFrom(ctx, r, sc.sink, m, "", t.TempDir())
			must(t, err)
			if got != f.wt {
				t.Fatalf("restored into %s, want %s", got, f.wt)
			}
			if s := statusOf(t, f.wt); s != before.status {
				t.Errorf("status after restore:\n%s\nwant:\n%s", s, before.status)
			}
			if c := contentOf(t, f.wt); c != content {
				t.Errorf("content after restore differs:\n%s\nwant:\n%s", c, content)
			}
			if env, err := os.ReadFile(filepath.Join(f.wt, ".env")); err != nil || string(env) != "SECRET=1\n" {
				t.Errorf("the ignored .env after restore: %q %v", env, err)
			}
			if _, err := os.Lstat(filepath.Join(f.wt, "node_modules")); !os.IsNotExist(err) {
				t.Errorf("node_modules restored (%v): it is rebuildable and never archived", err)
			}
		})
	}
}

// corruptingSink damages each object right after it is stored: what bit
// rot or a faulty server would do between upload and read-back.
type corruptingSink struct {
	sink.Sink
	t       *testing.T
	corrupt func(t *testing.T, name string)
}

func (c corruptingSink) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	n, err := c.Sink.Put(ctx, name, r)
	if err == nil && n > 200 {
		c.corrupt(c.t, name)
	}
	return n, err
}

// TestExportCatchesCorruption: an object damaged after it was stored fails
// the export (the read-back catches it), the export removes what it
// stored, and the folder and worktree are untouched.
func TestExportCatchesCorruption(t *testing.T) {
	for _, mk := range sinkCases {
		sc := mk(t)
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			src := filepath.Join(t.TempDir(), "run")
			layTree(t, src, 64<<10)
			before := testtree.Fingerprint(t, src)
			bad := corruptingSink{Sink: sc.sink, t: t, corrupt: sc.corrupt}
			_, err := ExportFolders(ctx, request(bad, "dir/run-1/20260102T030405Z"), []Folder{{Name: "run", Path: src}})
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("export to a corrupting sink: %v, want ErrMismatch", err)
			}
			if testtree.Fingerprint(t, src) != before {
				t.Fatal("the folder changed")
			}
			if !sc.empty(t) {
				t.Fatal("the failed export left objects in the sink")
			}

			f := newRepo(t)
			dirty(t, f.wt)
			state := stateOf(t, f.wt)
			_, err = ExportWorktree(ctx, gitcmd.Runner{}, request(bad, "worktree/x/20260102T030405Z"),
				Worktree{Path: f.wt, Repo: f.repo, Ref: SnapshotRefPrefix + "x/1"})
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("worktree export to a corrupting sink: %v, want ErrMismatch", err)
			}
			if after := stateOf(t, f.wt); after.status != state.status || !slices.Equal(after.index, state.index) {
				t.Fatal("the worktree changed")
			}
			if !sc.empty(t) {
				t.Fatal("the failed worktree export left objects in the sink")
			}
			// TestAbandonedExportLeavesNoRef: nor a ref in the repository.
			if refs := testtree.Git(t, f.repo, "for-each-ref", SnapshotRefPrefix); refs != "" {
				t.Fatalf("the failed worktree export left refs:\n%s", refs)
			}
		})
	}
}

// TestExportDiskFull: the local archive folder fills up while the tar is
// written; the export fails with the reason, leaves no partial file, and
// the folder is untouched.
func TestExportDiskFull(t *testing.T) {
	root := filepath.Join(t.TempDir(), "small")
	testtree.MountTmpfs(t, root, "size=1m")
	s, err := sink.NewLocal(root)
	must(t, err)
	src := filepath.Join(t.TempDir(), "run")
	must(t, os.MkdirAll(src, 0o755))
	randomFile(t, filepath.Join(src, "big.bin"), 3<<20, 7)
	before := testtree.Fingerprint(t, src)
	_, err = ExportFolders(context.Background(), request(s, "dir/run-1/20260102T030405Z"), []Folder{{Name: "run", Path: src}})
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("export onto a full disk: %v", err)
	}
	if testtree.Fingerprint(t, src) != before {
		t.Fatal("the folder changed")
	}
	if n := testtree.CountEntries(t, root); n != 0 {
		t.Fatalf("%d entries left in the archive folder", n)
	}
}

// samplingSink samples the heap while objects stream into it.
type samplingSink struct {
	sink.Sink
	w *memWriter
}

func (s samplingSink) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	return s.Sink.Put(ctx, name, io.TeeReader(r, s.w))
}

// TestExportMemoryBounded: exporting a 96 MiB folder to either sink holds
// a bounded amount of memory (the zstd window, the copy buffer, one S3
// part), far below the folder's size.
func TestExportMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 MiB")
	}
	src := filepath.Join(t.TempDir(), "run")
	must(t, os.MkdirAll(src, 0o755))
	const size = 96 << 20
	randomFile(t, filepath.Join(src, "big.bin"), size, 3)
	for _, mk := range sinkCases {
		sc := mk(t)
		t.Run(sc.name, func(t *testing.T) {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			baseline := ms.HeapInuse
			w := &memWriter{}
			m, err := ExportFolders(context.Background(), request(samplingSink{sc.sink, w}, "dir/run-1/20260102T030405Z"),
				[]Folder{{Name: "run", Path: src}})
			must(t, err)
			if m.Folders[0].Bytes != size {
				t.Fatalf("stored %d bytes", m.Folders[0].Bytes)
			}
			grew := int64(w.peak) - int64(baseline)
			t.Logf("%s: heap in use grew by %.1f MiB while exporting %d MiB", sc.name, float64(grew)/(1<<20), size>>20)
			if grew > 40<<20 {
				t.Errorf("heap in use grew by %d MiB; want well below the folder's %d MiB", grew>>20, size>>20)
			}
		})
	}
}

// TestExportFolderSet: a container's mounted home and workspace, archived
// together (one tar each) and restored to new places by name; a bad set of
// folders is refused before anything is stored.
func TestExportFolderSet(t *testing.T) {
	sc := localSink(t)
	ctx := context.Background()
	base := t.TempDir()
	home, ws := filepath.Join(base, "home"), filepath.Join(base, "workspace")
	write(t, filepath.Join(home, ".bashrc"), "export A=1\n", 0o644)
	write(t, filepath.Join(home, ".ssh/config"), "Host x\n", 0o600)
	write(t, filepath.Join(ws, "main.py"), "print(1)\n", 0o755)
	write(t, filepath.Join(ws, "uv.lock"), "lock\n", 0o644)
	write(t, filepath.Join(ws, ".venv/bin/python"), "elf\n", 0o755)
	must(t, os.Symlink("main.py", filepath.Join(ws, "entry")))
	wantHome, wantWS := restorable(t, home), restorable(t, ws, ".venv")
	req := request(sc.sink, "docker/c1/20260102T030405Z")
	m, err := ExportFolders(ctx, req, []Folder{{Name: "home", Path: home}, {Name: "workspace", Path: ws,
		Dependencies: []string{filepath.Join(ws, ".venv")}}})
	must(t, err)
	if len(m.Objects) != 2 || m.Objects[0].Name != "docker/c1/20260102T030405Z.home.tar.zst" ||
		m.Objects[1].Name != "docker/c1/20260102T030405Z.workspace.tar.zst" {
		t.Fatalf("objects: %+v", m.Objects)
	}
	if len(m.Dependencies) != 1 || m.Dependencies[0].Folder != "workspace" || !slices.Equal(m.Dependencies[0].LockFiles, []string{"uv.lock"}) {
		t.Fatalf("dependencies: %+v", m.Dependencies)
	}
	// The recorded manifest is what a restore starts from.
	parsed, err := ParseManifest(m.BackendExport().Manifest)
	must(t, err)
	to := t.TempDir()
	must(t, RestoreFolders(ctx, sc.sink, parsed, map[string]string{"home": filepath.Join(to, "h"), "workspace": filepath.Join(to, "w")}))
	if restorable(t, filepath.Join(to, "h")) != wantHome || restorable(t, filepath.Join(to, "w")) != wantWS {
		t.Fatal("restored folders differ")
	}
	if err := RestoreFolders(ctx, sc.sink, parsed, map[string]string{"nope": filepath.Join(to, "x")}); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("restore of an unknown folder: %v", err)
	}
	for _, bad := range [][]Folder{{{Name: "a", Path: home}, {Name: "a", Path: ws}}, {{Name: "a/b", Path: home}}, {{Name: "", Path: home}}} {
		if _, err := ExportFolders(ctx, request(sc.sink, "docker/c1/20260102T030406Z"), bad); err == nil {
			t.Errorf("folders %+v accepted", bad)
		}
	}
	// A damaged object is refused before anything is written.
	sc.corrupt(t, m.Objects[1].Name)
	dest := filepath.Join(to, "again")
	if err := RestoreFolders(ctx, sc.sink, parsed, map[string]string{"workspace": dest}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("restore of a damaged archive: %v", err)
	}
	if _, err := os.Lstat(dest); !os.IsNotExist(err) {
		t.Fatal("a damaged archive was extracted")
	}
}

func TestLockFiles(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"package-lock.json", "requirements.txt", "Cargo.lock", "web/yarn.lock"} {
		write(t, filepath.Join(root, f), "x\n", 0o644)
	}
	for dep, want := range map[string][]string{
		"node_modules":     {"package-lock.json"},
		".venv":            {"requirements.txt"},
		"target":           {"Cargo.lock"},
		"web/node_modules": {"web/yarn.lock"},
		"build":            {"Cargo.lock", "package-lock.json", "requirements.txt"},
	} {
		if got := lockFiles(root, filepath.Join(root, dep)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", dep, got, want)
		}
	}
}
