package s3test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tulip-temporal/tulip/s3store"
)

// Install builds weed (SeaweedFS Version) from its module on the Go module
// proxy into CachePath, unless it is there or $TULIP_WEED names it, and
// returns its path. It needs the go command; the first build takes minutes
// (about 8 on 2 cores), and later calls return at once. Progress and the
// compiler's output go to log (nil: none).
func Install(ctx context.Context, log func(string)) (string, error) {
	if p, err := Binary(); err == nil {
		return p, nil
	} else if os.Getenv(EnvBinary) != "" {
		return "", err
	}
	out, err := CachePath()
	if err != nil {
		return "", err
	}
	if log == nil {
		log = func(string) {}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	// go install refuses the module for its replace directive: it is
	// built as the main module, from the module cache.
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	run := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = dir, env
		b, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("s3test: go %s: %w\n%s", strings.Join(args, " "), err, b)
		}
		return strings.TrimSpace(string(b)), nil
	}
	mod := "github.com/seaweedfs/seaweedfs@" + Version
	log("downloading " + mod)
	if _, err := run(filepath.Dir(out), "mod", "download", mod); err != nil {
		return "", err
	}
	cache, err := run(filepath.Dir(out), "env", "GOMODCACHE")
	if err != nil {
		return "", err
	}
	log("building weed (minutes, once)")
	partial := out + ".partial"
	if _, err := run(filepath.Join(cache, "github.com", "seaweedfs", "seaweedfs@"+Version), "build", "-o", partial, "./weed"); err != nil {
		return "", err
	}
	if err := os.Rename(partial, out); err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	log("weed is " + out)
	return out, nil
}

// Options are s3store options for the server's bucket, with a client that
// reaches it (its static credentials, path style, the SDK's retries).
func (s *Server) Options() s3store.Options {
	key, secret := s.AccessKey, s.SecretKey
	c := s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: key, SecretAccessKey: secret, Source: "s3test"}, nil
		}),
	})
	return s3store.Options{Bucket: s.Bucket, Client: c}
}
