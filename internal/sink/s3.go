package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Options configure an S3 sink.
type S3Options struct {
	// Endpoint is the server: "https://s3.example.com", "http://127.0.0.1:7070"
	// or a bare "host:port" (HTTPS).
	Endpoint string
	Bucket   string
	// Prefix goes in front of every object name ("" for none).
	Prefix string
	Region string
	// Credentials: AccessKeyID and SecretAccessKey when set; else the
	// profile Profile ("" for $AWS_PROFILE or "default") of the shared
	// credentials file CredentialsFile when set; else AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN from the environment.
	AccessKeyID, SecretAccessKey, SessionToken string
	CredentialsFile, Profile                   string
	// PartSize is the size of each uploaded part, and so of the one buffer
	// an upload holds. Default 16 MiB; at least 5 MiB (the S3 minimum).
	PartSize uint64
	// MaxRetries bounds the retries of one request. Default 3.
	MaxRetries int
	// Transport, when set, replaces the HTTP transport (tests).
	Transport http.RoundTripper
	// StallTimeout and StallBytes are the stall detector (stallTransport):
	// every request must move StallBytes in every StallTimeout, or it
	// fails with ErrStalled. Defaults DefaultStallTimeout and
	// DefaultStallBytes.
	StallTimeout time.Duration
	StallBytes   int64
}

// DefaultPartSize is the default S3Options.PartSize.
const DefaultPartSize = 16 << 20

// S3 stores objects in a bucket of an S3-compatible server.
type S3 struct {
	client   *minio.Client
	bucket   string
	prefix   string
	partSize uint64
}

// NewS3 checks opts and returns the sink. It does not contact the server:
// Check does.
func NewS3(opts S3Options) (*S3, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3 sink: no bucket")
	}
	host, secure, err := parseEndpoint(opts.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3 sink: %w", err)
	}
	creds, err := s3Credentials(opts)
	if err != nil {
		return nil, fmt.Errorf("s3 sink: %w", err)
	}
	if opts.PartSize == 0 {
		opts.PartSize = DefaultPartSize
	}
	if opts.PartSize < 5<<20 {
		return nil, fmt.Errorf("s3 sink: part size %d is below the S3 minimum of 5 MiB", opts.PartSize)
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 3
	}
	prefix := strings.Trim(opts.Prefix, "/")
	if prefix != "" {
		if err := CheckName(prefix); err != nil {
			return nil, fmt.Errorf("s3 sink: prefix: %w", err)
		}
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.StallBytes <= 0 {
		opts.StallBytes = DefaultStallBytes
	}
	rt := opts.Transport
	if rt == nil {
		if rt, err = minio.DefaultTransport(secure); err != nil {
			return nil, fmt.Errorf("s3 sink: %w", err)
		}
	}
	// Upload, read-back, removal and the bucket check all go through the
	// stall detector: bounded by progress, not only per call.
	rt = &stallTransport{rt: rt, window: opts.StallTimeout, minBytes: opts.StallBytes}
	client, err := minio.New(host, &minio.Options{
		Creds: creds, Secure: secure, Region: opts.Region, Transport: rt,
		MaxRetries: opts.MaxRetries, BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 sink: %w", err)
	}
	return &S3{client: client, bucket: opts.Bucket, prefix: prefix, partSize: opts.PartSize}, nil
}

func parseEndpoint(endpoint string) (host string, secure bool, err error) {
	if endpoint == "" {
		return "", false, errors.New("no endpoint")
	}
	if !strings.Contains(endpoint, "://") {
		return endpoint, true, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", false, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", false, fmt.Errorf("endpoint %q: want http(s)://host[:port]", endpoint)
	}
	return u.Host, u.Scheme == "https", nil
}

func s3Credentials(opts S3Options) (*credentials.Credentials, error) {
	var creds *credentials.Credentials
	switch {
	case opts.AccessKeyID != "" || opts.SecretAccessKey != "":
		creds = credentials.NewStaticV4(opts.AccessKeyID, opts.SecretAccessKey, opts.SessionToken)
	case opts.CredentialsFile != "":
		if _, err := os.Stat(opts.CredentialsFile); err != nil {
			return nil, fmt.Errorf("credentials file: %w", err)
		}
		creds = credentials.NewFileAWSCredentials(opts.CredentialsFile, opts.Profile)
	default:
		creds = credentials.NewEnvAWS()
	}
	v, err := creds.GetWithContext(nil) // env and file providers make no request
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	if v.AccessKeyID == "" || v.SecretAccessKey == "" {
		where := "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
		if opts.CredentialsFile != "" {
			where = "the credentials file " + opts.CredentialsFile
		}
		return nil, fmt.Errorf("no access key and secret in %s", where)
	}
	return creds, nil
}

func (s *S3) key(name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	if s.prefix == "" {
		return name, nil
	}
	return s.prefix + "/" + name, nil
}

// URL implements Sink: s3://bucket/prefix/name.
func (s *S3) URL(name string) string {
	k, _ := s.key(name)
	return "s3://" + s.bucket + "/" + k
}

// Check implements Sink: the server answers and the bucket exists.
func (s *S3) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("check bucket %s at %s: %w", s.bucket, s.client.EndpointURL(), err)
	}
	if !ok {
		return fmt.Errorf("check bucket %s at %s: the bucket does not exist: %w", s.bucket, s.client.EndpointURL(), ErrNotFound)
	}
	return nil
}

// Put implements Sink: a multipart upload of unknown length in parts of
// PartSize, one part buffered at a time; on error the upload is aborted and
// no object appears.
func (s *S3) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	key, err := s.key(name)
	if err != nil {
		return 0, fmt.Errorf("put object: %w", err)
	}
	info, err := s.client.PutObject(ctx, s.bucket, key, r, -1, minio.PutObjectOptions{
		PartSize: s.partSize, ContentType: "application/octet-stream",
	})
	if err != nil {
		return info.Size, fmt.Errorf("put object %s: %w", s.URL(name), s.explain(err))
	}
	return info.Size, nil
}

// Open implements Sink.
func (s *S3) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	key, err := s.key(name)
	if err != nil {
		return nil, fmt.Errorf("open object: %w", err)
	}
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err == nil {
		// GetObject is lazy: Stat makes the request, so a missing object
		// fails here and not at the first Read.
		_, err = obj.Stat()
	}
	if err != nil {
		if obj != nil {
			obj.Close()
		}
		return nil, fmt.Errorf("open object %s: %w", s.URL(name), s.explain(err))
	}
	return obj, nil
}

// Remove implements Sink.
func (s *S3) Remove(ctx context.Context, name string) error {
	key, err := s.key(name)
	if err != nil {
		return fmt.Errorf("remove object: %w", err)
	}
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if errors.Is(s.explain(err), ErrNotFound) && minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return nil
		}
		return fmt.Errorf("remove object %s: %w", s.URL(name), s.explain(err))
	}
	return nil
}

// explain turns the server's "no such bucket/key" into ErrNotFound.
func (s *S3) explain(err error) error {
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchBucket:
		return fmt.Errorf("bucket %s does not exist: %w (%w)", s.bucket, ErrNotFound, err)
	case minio.NoSuchKey:
		return fmt.Errorf("%w (%w)", ErrNotFound, err)
	}
	return err
}

var _ Sink = (*S3)(nil)
