package cloudflare

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"

	"github.com/reclaimer/reclaimer/internal/archive"
)

// checker counts and hashes what is read through it.
type checker struct {
	r io.Reader
	h hash.Hash
	n int64
}

func newChecker(r io.Reader) *checker { return &checker{r: r, h: sha256.New()} }

func (c *checker) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// verify compares what was read with the object as stored.
func (c *checker) verify(o archive.Object) error {
	if c.n != o.Bytes || hex.EncodeToString(c.h.Sum(nil)) != o.SHA256 {
		return fmt.Errorf("sent %d bytes of %s, stored %d: %w", c.n, o.Name, o.Bytes, archive.ErrMismatch)
	}
	return nil
}
