package remote_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/remote"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// TestPagesEnd: rule "a listing ends", on the endless paginations a
// provider can serve: a fresh next-page token every time (items out of
// scope, or empty pages), and items in scope without end. Each ends with
// ErrUnbounded within a deadline and under a memory ceiling, and what is
// out of scope is never kept.
func TestPagesEnd(t *testing.T) {
	type item struct {
		ID    string
		Pool  string
		Bytes [512]byte
	}
	keep := func(it item) bool { return it.Pool == "ours" }
	page := func(n int, pool string, cursor string) []item {
		out := make([]item, n)
		for i := range out {
			out[i] = item{ID: cursor + "-" + strconv.Itoa(i), Pool: pool}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		fetch func(ctx context.Context, cursor string) ([]item, string, error)
	}{
		{"fresh token, out of scope", func(_ context.Context, c string) ([]item, string, error) {
			n, _ := strconv.Atoi(c)
			return page(1000, "theirs", c), strconv.Itoa(n + 1), nil
		}},
		{"fresh token, empty pages", func(_ context.Context, c string) ([]item, string, error) {
			n, _ := strconv.Atoi(c)
			return nil, strconv.Itoa(n + 1), nil
		}},
		{"in scope without end", func(_ context.Context, c string) ([]item, string, error) {
			n, _ := strconv.Atoi(c)
			return page(100, "ours", c), strconv.Itoa(n + 1), nil
		}},
		{"empty then one item, again and again", func(_ context.Context, c string) ([]item, string, error) {
			n, _ := strconv.Atoi(c)
			if n%4 == 3 {
				return page(1, "theirs", c), strconv.Itoa(n + 1), nil
			}
			return nil, strconv.Itoa(n + 1), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			var err error
			var got []item
			// 300 pages of 1000 items of ~0.5 KB go by in the first case:
			// about 150 MB had they been kept. (The defaults are larger;
			// a test under the race detector on a loaded machine must
			// stay quick.)
			testtree.HeapCeiling(t, 64<<20, func() {
				got, err = remote.Pages(ctx, remote.Bounds{MaxPages: 300}, keep, tc.fetch)
			})
			if !errors.Is(err, remote.ErrUnbounded) || got != nil {
				t.Fatalf("err = %v, %d items", err, len(got))
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("took %s", took)
			}
		})
	}

	// A listing that ends keeps only what is in scope.
	n := 0
	got, err := remote.Pages(context.Background(), remote.Bounds{}, keep, func(_ context.Context, c string) ([]item, string, error) {
		n++
		if n == 3 {
			return page(2, "ours", c), "", nil
		}
		return append(page(5, "theirs", c), page(1, "ours", c)...), "p" + strconv.Itoa(n), nil
	})
	if err != nil || len(got) != 4 {
		t.Fatalf("%d items, %v", len(got), err)
	}
	// A context that ends stops the paging between pages.
	ctx, cancel := context.WithCancel(context.Background())
	_, err = remote.Pages(ctx, remote.Bounds{MaxPages: 1 << 30}, nil, func(_ context.Context, c string) ([]item, string, error) {
		m, _ := strconv.Atoi(c)
		if m == 10 {
			cancel()
		}
		return page(1, "x", c), strconv.Itoa(m + 1), nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled listing: %v", err)
	}
}
