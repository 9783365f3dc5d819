package activity

import (
	"path/filepath"
	"sync"
)

// Cache remembers, per root, what is safe to remember between walks (see
// the package documentation). The zero value is not usable; a nil *Cache
// caches nothing. It is safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	roots map[string]*rootState
	// gitReads counts how often a .git file was read, for tests.
	gitReads int
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{roots: map[string]*rootState{}} }

// Forget drops what is remembered about root (removed, or no longer
// managed).
func (c *Cache) Forget(root string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.roots, filepath.Clean(root))
	c.mu.Unlock()
}

// Len tells how many roots are remembered.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.roots)
}

// fileKey identifies one version of a file: a rewrite changes its ctime.
type fileKey struct {
	major, minor uint32
	ino, size    uint64
	mtime, ctime stamp
}

// rootState is what is remembered about one root. Its methods are no-ops
// on a nil receiver (no cache).
type rootState struct {
	c         *Cache
	gitKey    fileKey
	gitDirVal string
	gitKnown  bool
	hintRel   string
}

func (c *Cache) state(root string) *rootState {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.roots == nil {
		c.roots = map[string]*rootState{}
	}
	st := c.roots[root]
	if st == nil {
		st = &rootState{c: c}
		c.roots[root] = st
	}
	return st
}

func (s *rootState) gitDir(k fileKey) (string, bool) {
	if s == nil {
		return "", false
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.gitKnown && s.gitKey == k {
		return s.gitDirVal, true
	}
	return "", false
}

func (s *rootState) setGitDir(k fileKey, dir string) {
	if s == nil {
		return
	}
	s.c.mu.Lock()
	s.gitKey, s.gitDirVal, s.gitKnown = k, dir, true
	s.c.gitReads++
	s.c.mu.Unlock()
}

func (s *rootState) hint() string {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.hintRel
}

// setHint remembers the directory (relative to the root) that held the
// newest entry; "." or "" (the root itself) is not worth a hint.
func (s *rootState) setHint(rel string) {
	if rel == "." {
		rel = ""
	}
	s.c.mu.Lock()
	s.hintRel = rel
	s.c.mu.Unlock()
}
