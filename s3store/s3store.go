// Package s3store keeps tulip's state outside history in an object store
// that workers on many machines share: each thread's newest state (a
// tulip.ThreadStore) and large payloads (a blobstore.Store). It speaks
// the S3 API (github.com/aws/aws-sdk-go-v2): AWS S3, and the S3-compatible
// services (SeaweedFS, MinIO, Ceph RGW, Cloudflare R2 among them) that
// honour conditional writes, which Check tells.
//
// Newest-wins holds across processes and machines by the store's own
// conditional writes, not a lock: a thread's first state is written with
// If-None-Match: * and every later one with If-Match: the ETag it read. A
// save that loses a race reads again and decides again. Blobs are content
// addressed, written with If-None-Match: *, so writing one twice is
// harmless. The service must honour both conditions on PutObject (AWS S3
// has since 2024; docs/deploy.md lists the others).
//
// Credentials come from the SDK's standard chain (environment, shared
// config and credentials files, SSO, web identity, instance and task
// roles), never from history or from the URL.
package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Options name a bucket and how to reach it. Bucket is required.
type Options struct {
	// Bucket holds everything the stores write. Required.
	Bucket string
	// Prefix goes before every key ("tenant-a/", say). Thread states are
	// under Prefix+"threads/", blobs under Prefix+"blobs/", entries moved
	// aside under Prefix+"aside/". Zero value: the bucket's root.
	Prefix string
	// Client is the S3 client. Zero value: one from the SDK's default
	// configuration chain, with Region, Endpoint and PathStyle applied.
	Client *s3.Client
	// Region is the bucket's region. Zero value: the chain's (AWS_REGION,
	// the shared config), else "us-east-1".
	Region string
	// Endpoint is the service's URL, for an S3-compatible service
	// ("http://127.0.0.1:8333", "https://ACCOUNT.r2.cloudflarestorage.com").
	// Zero value: AWS S3.
	Endpoint string
	// PathStyle addresses the bucket in the path (ENDPOINT/BUCKET/KEY)
	// rather than the host name. Zero value: off for AWS S3, on when
	// Endpoint is set (what most S3-compatible services need).
	PathStyle *bool
}

// Bucket is a bucket the stores share: Threads and Blobs open them.
type Bucket struct {
	client *s3.Client
	bucket string
	prefix string
}

// ErrNoCredentials is Open's error when the SDK's credential chain finds
// no credentials (no AWS_ACCESS_KEY_ID, profile, web identity, or
// instance or task role).
var ErrNoCredentials = errors.New("s3store: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run with an instance or task role")

// Open connects to the bucket opts names. Without opts.Client it asks the
// SDK's credential chain for credentials once (on EC2 that reaches the
// instance metadata service; set AWS_EC2_METADATA_DISABLED=true where
// there is none), and fails with ErrNoCredentials when it finds none. It
// makes no request of the bucket: a missing bucket or a credential the
// service refuses is the first save's error (Check finds both at once).
func Open(ctx context.Context, opts Options) (*Bucket, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3store: no bucket")
	}
	c := opts.Client
	if c == nil {
		var load []func(*config.LoadOptions) error
		if opts.Region != "" {
			load = append(load, config.WithRegion(opts.Region))
		}
		cfg, err := config.LoadDefaultConfig(ctx, load...)
		if err != nil {
			return nil, fmt.Errorf("s3store: AWS configuration: %w", err)
		}
		if cfg.Region == "" {
			cfg.Region = "us-east-1"
		}
		if cfg.Credentials == nil {
			return nil, ErrNoCredentials
		}
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			return nil, fmt.Errorf("%w (the chain's last answer: %v)", ErrNoCredentials, err)
		}
		pathStyle := opts.Endpoint != ""
		if opts.PathStyle != nil {
			pathStyle = *opts.PathStyle
		}
		c = s3.NewFromConfig(cfg, func(o *s3.Options) {
			if opts.Endpoint != "" {
				o.BaseEndpoint = aws.String(opts.Endpoint)
				// S3-compatible services differ in the checksums
				// they take: send and check them only when the
				// operation requires it.
				o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
				o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			}
			o.UsePathStyle = pathStyle
		})
	}
	prefix := opts.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &Bucket{client: c, bucket: opts.Bucket, prefix: prefix}, nil
}

// ParseURL reads a store URL into Options:
//
//	s3://BUCKET/PREFIX?region=REGION&endpoint=URL&path_style=true
//
// Every query parameter is optional; a parameter it does not know is an
// error (a misspelt "endpiont" must not send threads to AWS).
func ParseURL(raw string) (Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Options{}, fmt.Errorf("s3store: %v", err)
	}
	if u.Scheme != "s3" {
		return Options{}, fmt.Errorf("s3store: %q is not an s3:// URL", raw)
	}
	if u.Host == "" {
		return Options{}, fmt.Errorf("s3store: %q names no bucket (s3://BUCKET/PREFIX)", raw)
	}
	if u.User != nil {
		return Options{}, errors.New("s3store: credentials do not go in the URL: the SDK's chain reads them (AWS_ACCESS_KEY_ID, a profile, a role)")
	}
	o := Options{Bucket: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	for k, v := range u.Query() {
		switch k {
		case "region":
			o.Region = v[0]
		case "endpoint":
			o.Endpoint = v[0]
		case "path_style":
			b, err := strconv.ParseBool(v[0])
			if err != nil {
				return Options{}, fmt.Errorf("s3store: path_style=%q is not a boolean", v[0])
			}
			o.PathStyle = &b
		default:
			return Options{}, fmt.Errorf("s3store: unknown parameter %q in %q (known: region, endpoint, path_style)", k, raw)
		}
	}
	return o, nil
}

// Client is the bucket's S3 client.
func (b *Bucket) Client() *s3.Client { return b.client }

// OpenURL is Open of ParseURL(raw).
func OpenURL(ctx context.Context, raw string) (*Bucket, error) {
	o, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	return Open(ctx, o)
}
