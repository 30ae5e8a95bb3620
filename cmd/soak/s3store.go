package soak

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/threadstate"
	"github.com/tulip-temporal/tulip/s3store"
)

// LateSaveDelay is how long a late save (lateSaver) waits between its
// read and its write: longer than a soak run takes, so that the thread's
// next runs save meanwhile.
const LateSaveDelay = 6 * time.Second

// s3Threads is the workers' thread store in the bucket raw names
// (s3store), encrypted with keyFile's keys when there is one. With
// late, half the saves are made again, late (lateSaver); with
// noCAS (the no-cas control), writes are sent without their conditions.
func s3Threads(ctx context.Context, raw, keyFile string, late, noCAS bool, creds ...aws.Credentials) (threadstate.Checkpointer, error) {
	o, err := s3store.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	region := o.Region
	if region == "" {
		region = "us-east-1"
	}
	load := []func(*config.LoadOptions) error{config.WithRegion(region)}
	for _, c := range creds {
		load = append(load, config.WithCredentialsProvider(credentials.StaticCredentialsProvider{Value: c}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, err
	}
	o.Client = s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.BaseEndpoint = aws.String(o.Endpoint)
		so.UsePathStyle = true
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.APIOptions = append(so.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("tulip-soak-faults", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if p, ok := in.Parameters.(*s3.PutObjectInput); ok {
					if noCAS {
						p.IfMatch, p.IfNoneMatch = nil, nil
					}
					if d, ok := ctx.Value(lateKey{}).(time.Duration); ok {
						sleep(ctx, d) // the save read the thread's entry, and writes late
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
		})
	})
	b, err := s3store.Open(ctx, o)
	if err != nil {
		return nil, err
	}
	var keys *codec.Keyring
	if keyFile != "" {
		if keys, err = codec.LoadKeyFile(keyFile); err != nil {
			return nil, err
		}
	}
	st := threadstate.PublicStore(b.Threads(nil))
	if keys != nil {
		st = threadstate.PublicStore(b.Threads(keys))
	}
	if late {
		st = lateSaver{st}
	}
	return st, nil
}

// lateKey marks a late save's context: its write waits this long.
type lateKey struct{}

// lateSaver makes half its saves again, at random, in the background, as an
// attempt that outlived its timeout would: the late save reads the
// thread's entry at once and writes LateSaveDelay later, by when the
// thread's next run may have saved a newer state. The store's conditional
// write must refuse it (the no-cas control lets it through).
type lateSaver struct{ threadstate.Checkpointer }

func (l lateSaver) Save(ctx context.Context, ref threadstate.ThreadRef, cp *threadstate.Checkpoint) error {
	if err := l.Checkpointer.Save(ctx, ref, cp); err != nil {
		return err
	}
	if rand.IntN(2) == 0 {
		// Half, so that a thread's last save is not always repeated
		// last: without the store's conditions, an older run's late
		// save can then be what the store keeps at the end.
		go func() {
			lctx, cancel := context.WithTimeout(context.WithValue(context.Background(), lateKey{}, LateSaveDelay), time.Minute)
			defer cancel()
			_ = l.Checkpointer.Save(lctx, ref, cp)
		}()
	}
	return nil
}
