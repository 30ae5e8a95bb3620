package tests

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/s3store"
	"github.com/tulip-temporal/tulip/storetest"
)

// Every thread store passes the conformance suite (package storetest):
// newest wins whatever the order and the races, a bad entry is an
// EntryError and is moved aside by the next save.
func TestThreadStoreConformance(t *testing.T) {
	for _, st := range threadStores {
		t.Run(st.name, func(t *testing.T) {
			opened := map[string]storeUnder{}
			under := func(t testing.TB) storeUnder {
				u, ok := opened[t.Name()]
				if !ok {
					u = st.open(t.(*testing.T), nil)
					opened[t.Name()] = u
				}
				return u
			}
			storetest.Run(t, storetest.Harness{
				Open: func(t testing.TB, c converter.PayloadCodec) tulip.ThreadStore {
					return under(t).public(c)
				},
				Corrupt: func(t testing.TB, thread string, b []byte) { under(t).write(t.(*testing.T), thread, b) },
				Aside:   func(t testing.TB, thread string) int { return under(t).aside(t.(*testing.T), thread) },
			})
		})
	}
}

// s3store's Check passes on a service that honours conditional writes
// (SeaweedFS), as often as it is run, and fails with
// ErrNoConditionalWrites on one that ignores them (the control: a client
// that drops the conditions from every PutObject, as such a service
// would).
func TestS3CheckConditionalWrites(t *testing.T) {
	srv := sharedS3(t)
	prefix := "check-" + taskQueue("c") + "/"
	b, err := s3store.Open(ctxT(t), s3store.Options{Bucket: srv.Bucket, Prefix: prefix, Client: srv.Client()})
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, b.Check(ctxT(t)))
	}

	ignoring := s3.New(srv.Client().Options(), func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("ignore-conditions", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if p, ok := in.Parameters.(*s3.PutObjectInput); ok {
					p.IfMatch, p.IfNoneMatch = nil, nil
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
		})
	})
	for _, p := range []string{prefix, "check-fresh-" + taskQueue("c") + "/"} {
		nb, err := s3store.Open(ctxT(t), s3store.Options{Bucket: srv.Bucket, Prefix: p, Client: ignoring})
		require.NoError(t, err)
		assert.ErrorIs(t, nb.Check(ctxT(t)), s3store.ErrNoConditionalWrites, p)
	}
}
