// Package archivebench measures archive throughput: how fast a workspace
// is exported (tar.zst streamed into a sink, then every object read back
// and checked) to a local folder and to a real S3 server (versitygw on
// loopback).
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/archive
//
// MB/s is of the workspace's file content (uncompressed). Workspaces:
//
//   - node_modules: ../shared/bench/node_modules.shape.tsv.gz (26,611
//     entries, 491 MB of file data) with include_dependencies = true, once
//     with the shape's zero-filled files (zstd's best case) and once with
//     every file filled with random bytes (its worst case); real
//     JavaScript lies between.
//   - source: a typical source workspace, 4,000 text files of 1-24 KB
//     (about 50 MB, compressible like code) in 200 folders.
package archivebench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/sink"
	"github.com/reclaimer/reclaimer/internal/testtree"
)

// randomize overwrites every regular file below root with random bytes of
// the same size.
func randomize(b *testing.B, root string) {
	rng := rand.NewChaCha8([32]byte{42})
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = io.CopyN(f, rng, fi.Size())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

var words = strings.Fields(`func return if else for range package import type struct interface
	const var err nil ctx context error string int64 bool true false append len make map chan
	select case default go defer switch break continue the a of to in is that it with as for`)

// laySource writes a typical source workspace: n text files.
func laySource(b *testing.B, root string, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("pkg%03d", i%200))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		var sb strings.Builder
		size := 1<<10 + rng.IntN(23<<10)
		for sb.Len() < size {
			sb.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(12) == 0 {
				sb.WriteString("\n\t")
			} else {
				sb.WriteByte(' ')
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%04d.go", i)), []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func contentBytes(b *testing.B, root string) int64 {
	var n int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

type sinkMaker struct {
	name string
	make func(b *testing.B) sink.Sink
}

var sinks = []sinkMaker{
	{"local", func(b *testing.B) sink.Sink {
		s, err := sink.NewLocal(filepath.Join(b.TempDir(), "archives"))
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
	{"s3", func(b *testing.B) sink.Sink {
		srv := testtree.StartS3(b)
		srv.MakeBucket(b, "archives")
		s, err := sink.NewS3(sink.S3Options{Endpoint: srv.Endpoint, Bucket: "archives", AccessKeyID: srv.AccessKey,
			SecretAccessKey: srv.SecretKey})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
}

func benchExport(b *testing.B, root string, include bool) {
	total := contentBytes(b, root)
	deps := []string{}
	if _, err := os.Stat(filepath.Join(root, "node_modules")); err == nil {
		deps = append(deps, filepath.Join(root, "node_modules"))
	}
	for _, sm := range sinks {
		b.Run(sm.name, func(b *testing.B) {
			s := sm.make(b)
			b.SetBytes(total)
			b.ReportAllocs()
			var stored int64
			i := 0
			for b.Loop() {
				i++
				m, err := archive.ExportFolders(context.Background(), archive.Request{Sink: s,
					Base: fmt.Sprintf("bench/ws/%d", i), Runtime: "ws", Backend: "bench", CreatedAt: time.Now(),
					IncludeDependencies: include},
					[]archive.Folder{{Name: "workspace", Path: root, Dependencies: deps}})
				if err != nil {
					b.Fatal(err)
				}
				stored = m.Bytes
			}
			b.ReportMetric(float64(stored)/(1<<20), "stored-MiB")
		})
	}
}

func BenchmarkNodeModulesZeros(b *testing.B) {
	shape := testtree.ShapePath()
	if shape == "" {
		b.Skip("no ../shared/bench/node_modules.shape.tsv.gz")
	}
	root := filepath.Join(b.TempDir(), "ws")
	testtree.LayShape(b, shape, root)
	benchExport(b, root, true)
}

func BenchmarkNodeModulesRandom(b *testing.B) {
	shape := testtree.ShapePath()
	if shape == "" {
		b.Skip("no ../shared/bench/node_modules.shape.tsv.gz")
	}
	root := filepath.Join(b.TempDir(), "ws")
	testtree.LayShape(b, shape, root)
	randomize(b, root)
	benchExport(b, root, true)
}

func BenchmarkSource(b *testing.B) {
	root := filepath.Join(b.TempDir(), "ws")
	laySource(b, root, 4000)
	benchExport(b, root, false)
}
