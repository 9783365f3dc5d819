package activity

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/reclaimer/reclaimer/internal/testtree"
)

// BenchmarkNewest walks a tree of 1,111 folders and 49,995 files (45 a
// folder, three levels of ten), all old but one file.
//
//   - full: Newest, no skip predicate (no allocation per entry)
//   - full-skip: Newest with a skip predicate (one path string per entry)
//   - after-none: NewestAfter with nothing newer: a full walk
//   - after-found: NewestAfter where a file in one leaf folder is newer
//   - after-hint: the same with a Cache that saw the activity there before
func BenchmarkNewest(b *testing.B) {
	root := b.TempDir()
	n := testtree.Synthetic(b, root, 3, 10, 45, 0)
	ageTree(b, root, base)
	setTime(b, filepath.Join(root, "d7", "d3", "d5", "f40"), hours(2))
	ctx := context.Background()
	bench := func(name string, f func() (Result, error), check func(Result) bool) {
		b.Run(name, func(b *testing.B) {
			var r Result
			for b.Loop() {
				var err error
				if r, err = f(); err != nil {
					b.Fatal(err)
				}
			}
			if !check(r) {
				b.Fatalf("wrong result %+v", r)
			}
			b.ReportMetric(float64(r.Files), "stats/op")
			b.ReportMetric(float64(n+1), "entries")
		})
	}
	isNewest := func(r Result) bool { return r.Newest.Equal(hours(2)) }
	bench("full", func() (Result, error) { return Newest(ctx, root, Options{}) }, isNewest)
	skip := func(rel string, isDir bool) bool { return isDir && filepath.Base(rel) == "node_modules" }
	bench("full-skip", func() (Result, error) { return Newest(ctx, root, Options{Skip: skip}) }, isNewest)
	bench("after-none", func() (Result, error) { return NewestAfter(ctx, root, hours(3), Options{}) },
		func(r Result) bool { return !r.Partial && isNewest(r) })
	bench("after-found", func() (Result, error) { return NewestAfter(ctx, root, hours(1), Options{}) },
		func(r Result) bool { return r.Partial && isNewest(r) })
	c := NewCache()
	if _, err := Newest(ctx, root, Options{Cache: c}); err != nil {
		b.Fatal(err)
	}
	bench("after-hint", func() (Result, error) { return NewestAfter(ctx, root, hours(1), Options{Cache: c}) },
		func(r Result) bool { return r.Partial && isNewest(r) })
}
