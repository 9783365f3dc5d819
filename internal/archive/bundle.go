package archive

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/reclaimer/reclaimer/internal/gitcmd"
)

// WriteBundle writes a self-contained git bundle of refs (full names such
// as refs/heads/feature and refs/reclaimer/...; their whole history, no
// prerequisites) from the repository at repoDir to path: git bundle create
// into a temporary name beside path, git bundle verify, a check that every
// ref is in the bundle and nothing is required of the receiving
// repository, fsync, rename into place, fsync of the folder.
func WriteBundle(ctx context.Context, r gitcmd.Runner, repoDir, path string, refs []string) (Object, error) {
	obj, err := writeBundle(ctx, r, repoDir, path, refs)
	if err != nil {
		return Object{}, fmt.Errorf("write bundle %s: %w", path, err)
	}
	return obj, nil
}

func writeBundle(ctx context.Context, r gitcmd.Runner, repoDir, path string, refs []string) (Object, error) {
	if len(refs) == 0 {
		return Object{}, fmt.Errorf("no refs to bundle")
	}
	for _, ref := range refs {
		if ref == "" || strings.HasPrefix(ref, "-") {
			return Object{}, fmt.Errorf("bad ref %q", ref)
		}
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return Object{}, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return Object{}, err
	}
	tmp := f.Name()
	f.Close()
	done := false
	defer func() {
		if !done {
			os.Remove(tmp)
		}
	}()
	args := append([]string{"bundle", "create", "--quiet", tmp}, refs...)
	if _, err := r.Run(ctx, repoDir, args...); err != nil {
		return Object{}, err
	}
	if _, err := r.Run(ctx, repoDir, "bundle", "verify", "--quiet", tmp); err != nil {
		return Object{}, err
	}
	h, err := readBundleHeader(tmp)
	if err != nil {
		return Object{}, err
	}
	if len(h.prerequisites) > 0 {
		return Object{}, fmt.Errorf("bundle needs %d commits it does not hold", len(h.prerequisites))
	}
	for _, ref := range refs {
		if _, ok := h.lookup(ref); !ok {
			return Object{}, fmt.Errorf("ref %q is not in the bundle", ref)
		}
	}
	n, sum, err := hashFile(ctx, tmp)
	if err != nil {
		return Object{}, err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return Object{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return Object{}, err
	}
	done = true
	if err := syncDir(filepath.Dir(path)); err != nil {
		return Object{}, err
	}
	return Object{Kind: KindBundle, Path: path, Bytes: n, SHA256: sum}, nil
}

type bundleHeader struct {
	refs          map[string]string // full ref name -> object id
	prerequisites []string
}

// lookup finds ref as given or as git would expand a short name.
func (h bundleHeader) lookup(ref string) (string, bool) {
	for _, name := range []string{ref, "refs/" + ref, "refs/heads/" + ref, "refs/tags/" + ref} {
		if id, ok := h.refs[name]; ok {
			return id, true
		}
	}
	return "", false
}

// readBundleHeader parses the text header of a v2 or v3 bundle.
func readBundleHeader(path string) (bundleHeader, error) {
	h := bundleHeader{refs: map[string]string{}}
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	first, err := br.ReadString('\n')
	if err != nil || (first != "# v2 git bundle\n" && first != "# v3 git bundle\n") {
		return h, fmt.Errorf("%s is not a git bundle", path)
	}
	for range 1 << 20 {
		line, err := br.ReadString('\n')
		if err != nil {
			return h, fmt.Errorf("read bundle header of %s: %w", path, err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return h, nil
		case strings.HasPrefix(line, "@"): // v3 capability
		case strings.HasPrefix(line, "-"):
			h.prerequisites = append(h.prerequisites, strings.TrimPrefix(line, "-"))
		default:
			id, name, ok := strings.Cut(line, " ")
			if !ok {
				return h, fmt.Errorf("read bundle header of %s: bad line %q", path, line)
			}
			h.refs[name] = id
		}
	}
	return h, fmt.Errorf("read bundle header of %s: too long", path)
}
