package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/threadstore"
	"github.com/tulip-temporal/tulip/s3store"
)

// Where tulip keeps state outside history (docs/deploy.md, "Many
// machines"): a thread store and a blob store, each named by one URL,
// s3://BUCKET/PREFIX?endpoint=...&region=... or a directory (a path, or
// file:///path).

// storeFlags adds --thread-store and --blob-store to fs.
func (e *env) storeFlags(fs *flagSet, c *conn) {
	fs.StringVar(&c.threadStore, "thread-store", "", "where threads outlive their runs' retention: s3://BUCKET/PREFIX?endpoint=URL&region=R, or a directory (default $TULIP_THREAD_STORE; else beside --db, or, with --address, "+defaultThreadDirText+")")
	fs.StringVar(&c.blobStore, "blob-store", "", "where payloads over the limit go: s3://BUCKET/PREFIX?..., or a directory (default $TULIP_BLOB_STORE; else beside --db)")
}

// defaultThreadDirText says where a worker of a named server keeps
// threads when no store is given.
const defaultThreadDirText = "$XDG_STATE_HOME/tulip/threads/NAMESPACE (~/.local/state/...)"

// defaultThreadDir is the thread store of a CLI worker on a named server
// given none: the user's state directory, per namespace.
func (e *env) defaultThreadDir(ns string) (string, error) {
	base := e.getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no thread store: give --thread-store (%v)", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "tulip", "threads", ns), nil
}

// isS3 reports whether raw names an object store.
func isS3(raw string) bool { return strings.HasPrefix(raw, "s3://") }

// dirOf is the directory a non-s3 store URL names.
func dirOf(raw string) (string, error) {
	if strings.HasPrefix(raw, "file://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "", err
		}
		if u.Host != "" && u.Host != "localhost" {
			return "", fmt.Errorf("%q: a file URL names a local directory (file:///path)", raw)
		}
		return u.Path, nil
	}
	if strings.Contains(raw, "://") {
		return "", fmt.Errorf("%q: a store is s3://BUCKET/PREFIX or a directory", raw)
	}
	return raw, nil
}

// openThreadStore opens the thread store raw names, encrypted with keys
// (nil: none).
func (e *env) openThreadStore(raw string, keys *codec.Keyring) (threadstate.Checkpointer, error) {
	if isS3(raw) {
		b, err := s3store.OpenURL(e.ctx, raw)
		if err != nil {
			return nil, err
		}
		// A service that ignores conditional writes would let an older
		// run's save replace a newer one's: refuse it. A bucket that
		// cannot be reached now is only a warning: saves retry.
		ctx, cancel := context.WithTimeout(e.ctx, 15*time.Second)
		err = b.Check(ctx)
		cancel()
		if errors.Is(err, s3store.ErrNoConditionalWrites) {
			return nil, fmt.Errorf("--thread-store %s: %w", raw, err)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "tulip: cannot check the thread store yet (%v); its saves will retry\n", err)
		}
		if keys == nil {
			return threadstate.PublicStore(b.Threads(nil)), nil
		}
		return threadstate.PublicStore(b.Threads(keys)), nil
	}
	dir, err := dirOf(raw)
	if err != nil {
		return nil, usageError{"--thread-store " + err.Error()}
	}
	d := threadstore.DirStore{Dir: dir}
	if keys != nil {
		d.Codec = keys
	}
	return d, nil
}

// openBlobStore opens the blob store raw names.
func (e *env) openBlobStore(raw string) (blobstore.Store, error) {
	if isS3(raw) {
		b, err := s3store.OpenURL(e.ctx, raw)
		if err != nil {
			return nil, err
		}
		return b.Blobs(), nil
	}
	dir, err := dirOf(raw)
	if err != nil {
		return nil, usageError{"--blob-store " + err.Error()}
	}
	return blobstore.NewDir(dir)
}

// storeWarnings are the lines a worker's process prints at start about
// its thread store: none kept on a namespace whose retention deletes
// runs, or states kept unencrypted.
func storeWarnings(ctx context.Context, c client.Client, ns string, threads string, encrypted, local bool) []string {
	var out []string
	if threads == "" {
		if local {
			return nil // the server lives and dies with this process
		}
		if d := namespaceRetention(ctx, c, ns); d > 0 {
			out = append(out, fmt.Sprintf("no thread store: namespace %s deletes closed runs after %s, and a thread whose runs are all gone would start empty (give --thread-store)", ns, retentionText(d)))
		}
		return out
	}
	if !encrypted {
		out = append(out, fmt.Sprintf("threads are stored unencrypted in %s (give --codec-key-file to encrypt them)", threads))
	}
	return out
}

// namespaceRetention is ns's retention (0: unknown or infinite).
func namespaceRetention(ctx context.Context, c client.Client, ns string) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	if err != nil {
		return 0
	}
	return d.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration()
}
