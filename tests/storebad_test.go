package tests

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/internal/threadstore"
	"github.com/tulip-temporal/tulip/s3store"
	"github.com/tulip-temporal/tulip/s3store/s3test"
)

// storeUnder is a thread store and a way under it, to break its entries
// as a torn write, a lost key or an operator would.
type storeUnder struct {
	store threadstate.Checkpointer
	// withCodec is a store over the same entries with codec c, as the
	// runtime holds it; public is the same store as a user holds it.
	withCodec func(c converter.PayloadCodec) threadstate.Checkpointer
	public    func(c converter.PayloadCodec) tulip.ThreadStore
	// read returns the thread's entry as stored.
	read func(t *testing.T, thread string) []byte
	// write replaces the thread's entry with b.
	write func(t *testing.T, thread string, b []byte)
	// unreadable makes the entry one the store cannot read at all, or
	// is nil when the store has no such state.
	unreadable func(t *testing.T, thread string)
	// aside counts the thread's entries moved aside.
	aside func(t *testing.T, thread string) int
}

// threadStores is every thread store the retention tests run on: each
// opens one for t with codec c.
var threadStores = []struct {
	name string
	open func(t *testing.T, c converter.PayloadCodec) storeUnder
}{
	{"dir", func(t *testing.T, c converter.PayloadCodec) storeUnder {
		d := threadstore.DirStore{Dir: filepath.Join(t.TempDir(), "threads"), Codec: c}
		return storeUnder{
			store: d,
			withCodec: func(c converter.PayloadCodec) threadstate.Checkpointer {
				return threadstore.DirStore{Dir: d.Dir, Codec: c}
			},
			public: func(c converter.PayloadCodec) tulip.ThreadStore {
				return tulip.DirStore{Dir: d.Dir, Codec: c}
			},
			read: func(t *testing.T, thread string) []byte {
				b, err := os.ReadFile(d.Path(thread))
				require.NoError(t, err)
				return b
			},
			write: func(t *testing.T, thread string, b []byte) {
				require.NoError(t, os.WriteFile(d.Path(thread), b, 0o600))
			},
			unreadable: func(t *testing.T, thread string) {
				require.NoError(t, os.Remove(d.Path(thread)))
				require.NoError(t, os.Mkdir(d.Path(thread), 0o700))
			},
			aside: func(t *testing.T, thread string) int {
				m, err := filepath.Glob(d.Path(thread) + ".bad-*")
				require.NoError(t, err)
				return len(m)
			},
		}
	}},
	{"s3", func(t *testing.T, c converter.PayloadCodec) storeUnder {
		srv := sharedS3(t)
		b, err := s3store.Open(ctxT(t), s3store.Options{Bucket: srv.Bucket, Prefix: "t-" + taskQueue("p") + "/", Client: srv.Client()})
		require.NoError(t, err)
		st := b.Threads(c)
		cl := srv.Client()
		return storeUnder{
			store:     threadstate.PublicStore(st),
			withCodec: func(c converter.PayloadCodec) threadstate.Checkpointer { return threadstate.PublicStore(b.Threads(c)) },
			public:    func(c converter.PayloadCodec) tulip.ThreadStore { return b.Threads(c) },
			read: func(t *testing.T, thread string) []byte {
				out, err := cl.GetObject(ctxT(t), &s3.GetObjectInput{Bucket: &srv.Bucket, Key: aws.String(st.Key(thread))})
				require.NoError(t, err)
				defer out.Body.Close()
				body, err := io.ReadAll(out.Body)
				require.NoError(t, err)
				return body
			},
			write: func(t *testing.T, thread string, body []byte) {
				_, err := cl.PutObject(ctxT(t), &s3.PutObjectInput{Bucket: &srv.Bucket, Key: aws.String(st.Key(thread)), Body: bytes.NewReader(body)})
				require.NoError(t, err)
			},
			aside: func(t *testing.T, thread string) int {
				out, err := cl.ListObjectsV2(ctxT(t), &s3.ListObjectsV2Input{Bucket: &srv.Bucket, Prefix: aws.String(st.AsidePrefix(thread))})
				require.NoError(t, err)
				return len(out.Contents)
			},
		}
	}},
}

// s3Shared is the tests' S3 server (SeaweedFS), started by the first test
// that needs it and ended by TestMain; each test keeps its entries under
// a prefix of its own.
var s3Shared struct {
	once sync.Once
	srv  *s3test.Server
	err  error
	dir  string
}

// sharedS3 is the tests' S3 server; without weed it skips t (fails it
// when CI=true).
func sharedS3(t *testing.T) *s3test.Server {
	t.Helper()
	s3Shared.once.Do(func() {
		if _, s3Shared.err = s3test.Binary(); s3Shared.err != nil {
			return
		}
		if s3Shared.dir, s3Shared.err = os.MkdirTemp("", "tulip-tests-s3-"); s3Shared.err != nil {
			return
		}
		s3Shared.srv, s3Shared.err = s3test.Start(s3Shared.dir)
	})
	if s3Shared.err != nil {
		if os.Getenv("CI") == "true" || os.Getenv(s3test.EnvBinary) != "" {
			t.Fatalf("%v (the S3 tests may not be skipped)", s3Shared.err)
		}
		t.Skip(s3Shared.err)
	}
	return s3Shared.srv
}

// stopSharedS3 ends the tests' S3 server, if one started.
func stopSharedS3() {
	if s3Shared.srv != nil {
		s3Shared.srv.Close()
	}
	if s3Shared.dir != "" {
		_ = os.RemoveAll(s3Shared.dir)
	}
}

// A thread's stored state that cannot be read (truncated, encrypted with a
// key the workers no longer have, not a file) never wedges the thread.
// When history holds the state, the next run completes, its refund served
// (billing asked once), and the bad entry is moved aside (kept, once) and
// the state saved fresh. When history does not (every run deleted), the
// next run fails at once with tulip.ThreadLost naming the entry, billing
// still asked once, and the entry is left where it was for an operator.
func TestBadStoreEntry(t *testing.T) {
	k1 := testKeyring(t, "k1", 1)
	k2 := testKeyring(t, "k2", 2)
	faults := []struct {
		name  string
		apply func(t *testing.T, s storeUnder, thread string) bool
	}{
		{"truncated", func(t *testing.T, s storeUnder, thread string) bool {
			b := s.read(t, thread)
			s.write(t, thread, b[:len(b)/2])
			return true
		}},
		{"key missing", func(t *testing.T, s storeUnder, thread string) bool {
			h, err := threadstore.DecodeHead(s.read(t, thread), k1, thread, "test")
			require.NoError(t, err)
			b, err := threadstore.EncodeHead(*h, k2)
			require.NoError(t, err)
			s.write(t, thread, b)
			return true
		}},
		{"not a file", func(t *testing.T, s storeUnder, thread string) bool {
			if s.unreadable == nil {
				return false
			}
			s.unreadable(t, thread)
			return true
		}},
	}
	for _, st := range threadStores {
		for _, f := range faults {
			for _, historyHolds := range []bool{true, false} {
				name := st.name + "/" + f.name + "/history gone"
				if historyHolds {
					name = st.name + "/" + f.name + "/history holds"
				}
				t.Run(name, func(t *testing.T) {
					s := st.open(t, k1)
					th := newRetentionThread(t, s.store, false)
					require.Equal(t, 1, th.refundRequests())
					if !f.apply(t, s, th.thread) {
						t.Skipf("store %s has no such entry", st.name)
					}
					if !historyHolds {
						for _, run := range th.runs {
							deleteRun(t, th.c, th.thread, run)
						}
					}
					ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Minute)
					defer cancel()
					begin := time.Now()
					h, res, err := runclient.Run(ctx, th.c, runclient.RunOptions{TaskQueue: th.tq, Model: "again", ThreadID: th.thread, Message: "did it go through?"})
					assert.Equal(t, 1, th.refundRequests(), "the refund did not run again")
					if !historyHolds {
						var failed *runclient.RunFailedError
						require.ErrorAs(t, err, &failed)
						assert.Equal(t, threadstate.ErrThreadLost, failed.Type())
						assert.Contains(t, failed.Error(), "cannot be read")
						assert.NotContains(t, failed.Error(), "\n")
						assert.Less(t, time.Since(begin), 30*time.Second, "failed at once, not after the load's retry window")
						assert.Zero(t, s.aside(t, th.thread), "the entry is left for an operator")
						return
					}
					require.NoError(t, err)
					require.Equal(t, agentrun.StatusCompleted, res.Status)
					assert.Equal(t, agentrun.OutcomeCached, res.Trace[0].Outcome, "served from history")
					assert.Empty(t, res.StoreError)
					assert.Equal(t, 1, s.aside(t, th.thread), "the bad entry is moved aside once")
					cp, err := s.store.Load(ctxT(t), threadstate.ThreadRef{ThreadID: th.thread})
					require.NoError(t, err, "the state was saved fresh")
					require.NotNil(t, cp)
					assert.Equal(t, h.RunID, cp.Run)
				})
			}
		}
	}
}

// testKeyring is a keyring of one key, id, whose bytes are all b.
func testKeyring(t *testing.T, id string, b byte) *codec.Keyring {
	secret := make([]byte, codec.KeySize)
	for i := range secret {
		secret[i] = b
	}
	k, err := codec.NewKeyring(codec.Key{ID: id, Secret: secret})
	require.NoError(t, err)
	return k
}
