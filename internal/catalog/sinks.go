package catalog

import (
	"fmt"
	"strings"
	"time"

	"github.com/reclaimer/reclaimer/internal/archive"
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/ledger"
	"github.com/reclaimer/reclaimer/internal/sink"
)

// S3Options turns [archive.s3] into sink options; credentials come from
// the environment or the configured file, never from the configuration.
func S3Options(c *config.ArchiveS3) sink.S3Options {
	o := sink.S3Options{Endpoint: c.Endpoint, Bucket: c.Bucket, Prefix: c.Prefix, Region: c.Region,
		CredentialsFile: c.CredentialsFile, Profile: c.Profile, StallBytes: c.StallBytes}
	if c.StallTimeout != nil {
		o.StallTimeout = time.Duration(*c.StallTimeout)
	}
	return o
}

// NewSink is where new archives go: [archive.s3] when set, else the
// archive folder. A sink that cannot be set up (no credentials) becomes
// sink.Unavailable: commands that do not archive still run, and an
// archive step fails with the reason, removing nothing.
func NewSink(cfg *config.Config) sink.Sink {
	var s sink.Sink
	var err error
	if cfg.Archive.S3 != nil {
		s, err = sink.NewS3(S3Options(cfg.Archive.S3))
	} else {
		s, err = sink.NewLocal(cfg.Archive.Dir)
	}
	if err != nil {
		return sink.Unavailable{Err: err}
	}
	return s
}

// SinkOf opens the sink holding a recorded archive, which need not be
// where new archives go now: a local archive is read where it was written;
// an S3 archive from its bucket and prefix, with the configured endpoint
// and credentials.
func SinkOf(cfg *config.Config, a ledger.Archive) (sink.Sink, error) {
	m, err := archive.ParseManifest(a.Manifest)
	if err != nil {
		return nil, err
	}
	root, ok := strings.CutSuffix(a.Location, "/"+archive.ManifestName(m.Name))
	if !ok {
		return nil, fmt.Errorf("archive %s: its location %s does not end in its manifest's name", a.ID, a.Location)
	}
	rest, isS3 := strings.CutPrefix(root, "s3://")
	if !isS3 {
		return sink.NewLocal(root)
	}
	if cfg.Archive.S3 == nil {
		return nil, fmt.Errorf("archive %s is in %s: configure [archive.s3] (endpoint and credentials) to reach it", a.ID, root)
	}
	opts := S3Options(cfg.Archive.S3)
	opts.Bucket, opts.Prefix, _ = strings.Cut(rest, "/")
	return sink.NewS3(opts)
}
