package workerplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/tulip-temporal/tulip/blobstore"
	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/activities"
	"github.com/tulip-temporal/tulip/internal/calllog"
	"github.com/tulip-temporal/tulip/internal/claims"
	"github.com/tulip-temporal/tulip/internal/protocol"
)

// ReplayOptions configure ReplayHistories. The zero value replays with a
// plain replayer and no logs.
type ReplayOptions struct {
	// Replayer are the replayer's options (your own interceptors, a data
	// converter); tulip's plugin is added to them, and Keys and Blobs fill
	// the converters and External Storage they leave unset.
	Replayer sdkworker.WorkflowReplayerOptions
	// Logger receives the SDK's replay logs (a nondeterminism failure's
	// stack trace among them). Zero value: none.
	Logger sdklog.Logger
	// Keys decrypt the histories: your workers' keys (codec.LoadKeyFile).
	// A history exported decrypted still needs them when it holds blob
	// references: the blobs stay ciphertext. Zero value: none; a payload
	// encrypted with a key is then named (a *codec.KeyError), not replayed.
	Keys *codec.Keyring
	// Blobs is the store your clients and workers keep large payloads in
	// (blobstore.ExternalStorage). Zero value: none.
	Blobs blobstore.Store
}

// ReplayError is a history that does not replay: the file, what went
// wrong, and the SDK's error. Error is one line: for a nondeterminism in a
// tool call, it names the event, the tool and the call, and the likely
// cause.
type ReplayError struct {
	File string
	// Explained says what differs, when tulip can tell: "" otherwise.
	Explained string
	Err       error
}

func (e *ReplayError) Error() string {
	if e.Explained != "" {
		return fmt.Sprintf("%s: replay failed: %s", e.File, e.Explained)
	}
	msg, _, _ := strings.Cut(e.Err.Error(), "\n")
	return fmt.Sprintf("%s: replay failed: %s", e.File, msg)
}

func (e *ReplayError) Unwrap() error { return e.Err }

// ReplayHistories replays JSON history files (as 'tulip history' or
// 'temporal workflow show --output json' write them) with tulip installed
// as opts configures it: give it the tools and hooks your workers have, and
// in ro the keys and blob store they use. It returns nil when every file
// replays, or the *ReplayError of each that does not, joined. A payload
// encrypted with a key ro does not hold fails its file with the key's id
// (a *codec.KeyError), before any replay. Use it in a test so that a change
// to your tools, hooks or tulip itself that would break running workflows
// fails before it ships:
//
//	files, _ := filepath.Glob("testdata/histories/*.json")
//	keys, _ := codec.LoadKeyFile("testdata/keys.txt") // if your workers encrypt
//	err := tworker.ReplayHistories(tworker.Options{Tools: tools, Hooks: hooks},
//		tworker.ReplayOptions{Keys: keys, Blobs: store}, files...)
//	if err != nil {
//		t.Fatal(err) // one line per file: the event, the tool, the likely cause
//	}
func ReplayHistories(opts Options, ro ReplayOptions, files ...string) error {
	rec := &recorder{}
	plugin, err := newPlugin(opts, rec)
	if err != nil {
		return err
	}
	ropts := ro.Replayer
	var pc converter.PayloadCodec = (*codec.Keyring)(nil) // no keys
	switch {
	case ro.Keys != nil:
		ropts.DataConverter, ropts.FailureConverter = ro.Keys.Converters(ropts.DataConverter)
		pc = ro.Keys
	case ropts.DataConverter == nil:
		ropts.DataConverter, ropts.FailureConverter = (*codec.Keyring)(nil).Converters(nil)
	}
	if ro.Blobs != nil && len(ropts.ExternalStorage.Drivers) == 0 {
		ropts.ExternalStorage = blobstore.ExternalStorage(ro.Blobs, 0)
	}
	ropts.Plugins = append(append([]sdkworker.Plugin(nil), ropts.Plugins...), plugin)
	r, err := sdkworker.NewWorkflowReplayerWithOptions(ropts)
	if err != nil {
		return err
	}
	logger := ro.Logger
	if logger == nil {
		logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	dc := ropts.DataConverter
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var errs []error
	for _, f := range files {
		hist, err := loadHistory(f)
		if err != nil {
			errs = append(errs, &ReplayError{File: f, Err: err})
			continue
		}
		if err := checkClaims(context.Background(), hist, ro.Blobs, len(ro.Replayer.ExternalStorage.Drivers) > 0); err != nil {
			errs = append(errs, &ReplayError{File: f, Explained: err.Error(), Err: err})
			continue
		}
		if err := CheckKeys(context.Background(), hist, pc, ro.Blobs); err != nil {
			errs = append(errs, &ReplayError{File: f, Explained: err.Error(), Err: err})
			continue
		}
		rec.reset()
		if err := r.ReplayWorkflowHistory(logger, hist); err != nil {
			errs = append(errs, &ReplayError{File: f, Explained: explain(hist, rec.calls(), dc), Err: err})
		}
	}
	return errors.Join(errs...)
}

func loadHistory(file string) (*historypb.History, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return client.HistoryFromJSON(f, client.HistoryJSONOptions{})
}

// CheckKeys decodes every payload of hist with pc (a codec.Keyring, or
// a nil *codec.Keyring for none), the blobs its references name read from blobs
// (nil: references are not followed), and returns the first
// *codec.KeyError: a payload encrypted with a key pc does not hold.
func CheckKeys(ctx context.Context, hist *historypb.History, pc converter.PayloadCodec, blobs blobstore.Store) error {
	var keyErr error
	_ = proxy.VisitPayloads(ctx, hist, proxy.VisitPayloadsOptions{
		Visitor: func(vc *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
			for _, p := range ps {
				p, err := blobstore.Resolve(vc.Context, blobs, p)
				if err != nil {
					continue // replay reports a blob it cannot read
				}
				var ke *codec.KeyError
				if _, err := pc.Decode([]*commonpb.Payload{p}); errors.As(err, &ke) && keyErr == nil {
					keyErr = ke
				}
			}
			return ps, nil
		},
		SkipSearchAttributes: true,
	})
	return keyErr
}

// MissingPayloadError is a history payload a replay cannot read: it is
// kept in External Storage and no store was given (or the store given
// lacks it). Error is one line naming the event, the driver, the blob and
// the option to set.
type MissingPayloadError struct {
	EventID   int64
	EventType string
	Driver    string // the claim's driver ("tulip-blobs": blobstore's)
	Key       string // the claim's key ("" when it has none)
	Err       error  // the store's error; nil when no store was given
}

func (e *MissingPayloadError) Error() string {
	what := fmt.Sprintf("event %d (%s) holds a payload kept in External Storage (driver %q, blob %s)", e.EventID, e.EventType, e.Driver, e.Key)
	if e.Err == nil {
		return what + ": give the blob store your clients and workers keep large payloads in (ReplayOptions.Blobs; --blob-store for tulip replay)"
	}
	return what + ", which the blob store given cannot read (ReplayOptions.Blobs): " + e.Err.Error()
}

func (e *MissingPayloadError) Unwrap() error { return e.Err }

// checkClaims finds the first External Storage claim in hist that blobs
// cannot resolve: every claim when blobs is nil, unless the replayer has
// drivers of its own (own), which then read theirs. It reads each blob
// (checking its hash), so a replay never fails in workflow code for a
// payload it could not read.
func checkClaims(ctx context.Context, hist *historypb.History, blobs blobstore.Store, own bool) error {
	if own && blobs == nil {
		return nil
	}
	for _, ev := range hist.GetEvents() {
		var first error
		_ = proxy.VisitPayloads(ctx, ev, proxy.VisitPayloadsOptions{
			Visitor: func(vc *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
				for _, p := range ps {
					if first != nil {
						break
					}
					c, ok := claims.Parse(p)
					if !ok {
						continue
					}
					e := &MissingPayloadError{EventID: ev.GetEventId(), EventType: ev.GetEventType().String(), Driver: c.Driver, Key: c.Data["key"]}
					if blobs == nil {
						first = e
						continue
					}
					if _, err := blobstore.Resolve(vc.Context, blobs, p); err != nil {
						e.Err = err
						first = e
					}
				}
				return ps, nil
			},
			SkipSearchAttributes: true,
		})
		if first != nil {
			return first
		}
	}
	return nil
}

// call is a tool call the workflow code made during a replay.
type call struct {
	activity, callID string
	served           bool
	servedFrom       int
}

// recorder is a worker interceptor, outside tulip's, that records each
// tool call the workflow code makes while a history replays.
type recorder struct {
	sdkinterceptor.WorkerInterceptorBase
	mu   sync.Mutex
	seen []call
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = nil
}

func (r *recorder) calls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.seen...)
}

func (r *recorder) InterceptWorkflow(_ sdkworkflow.Context, next sdkinterceptor.WorkflowInboundInterceptor) sdkinterceptor.WorkflowInboundInterceptor {
	i := &recInbound{r: r}
	i.Next = next
	return i
}

type recInbound struct {
	sdkinterceptor.WorkflowInboundInterceptorBase
	r *recorder
}

func (i *recInbound) Init(outbound sdkinterceptor.WorkflowOutboundInterceptor) error {
	o := &recOutbound{r: i.r}
	o.Next = outbound
	return i.Next.Init(o)
}

type recOutbound struct {
	sdkinterceptor.WorkflowOutboundInterceptorBase
	r *recorder
}

func (o *recOutbound) ExecuteActivity(ctx sdkworkflow.Context, activityType string, args ...any) sdkworkflow.Future {
	f := o.Next.ExecuteActivity(ctx, activityType, args...)
	if c := calllog.CallOf(ctx); c != nil {
		rc := call{activity: activityType, callID: c.CallID, servedFrom: -1}
		if c.ServedFrom != nil {
			rc.served, rc.servedFrom = true, c.ServedFrom.Seq
		}
		o.r.mu.Lock()
		o.r.seen = append(o.r.seen, rc)
		o.r.mu.Unlock()
	}
	return f
}

// scheduled is a tool activity a history schedules.
type scheduled struct {
	event            int64
	activity, callID string
}

// explain says where a replay's tool calls left the history's, and the
// likely cause: "" when they did not (the failure is elsewhere).
func explain(hist *historypb.History, code []call, dc converter.DataConverter) string {
	var want []scheduled
	for _, e := range hist.GetEvents() {
		a := e.GetActivityTaskScheduledEventAttributes()
		if a == nil || !strings.HasPrefix(a.GetActivityType().GetName(), protocol.ToolActivityPrefix) {
			continue
		}
		s := scheduled{event: e.GetEventId(), activity: a.GetActivityType().GetName()}
		if ps := a.GetInput().GetPayloads(); len(ps) > 0 {
			var in activities.ToolInput
			if dc.FromPayload(ps[0], &in) == nil {
				s.callID = in.CallID
			}
		}
		want = append(want, s)
	}
	inHistory := map[string]bool{}
	for _, w := range want {
		inHistory[w.callID] = true
	}
	var ran []call
	served := map[string]call{}
	for _, c := range code {
		if c.served {
			served[c.callID] = c
		} else {
			ran = append(ran, c)
		}
	}
	for i := 0; i < len(want) || i < len(ran); i++ {
		switch {
		case i < len(want) && i < len(ran) && want[i].activity == ran[i].activity && want[i].callID == ran[i].callID:
			continue
		case i < len(ran) && !inHistory[ran[i].callID]:
			c := ran[i]
			tool := strings.TrimPrefix(c.activity, protocol.ToolActivityPrefix)
			return fmt.Sprintf("this worker's code schedules %s (call %s), which the history serves from the log instead: was %s idempotent when the history was recorded? (likely: its Idempotent flag changed)",
				c.activity, c.callID, tool)
		case i < len(want) && i < len(ran):
			return fmt.Sprintf("event %d schedules %s (call %s), but this worker's code scheduled %s (call %s): the worker's tools or hooks differ from the recording worker's",
				want[i].event, want[i].activity, want[i].callID, ran[i].activity, ran[i].callID)
		case i < len(want):
			w := want[i]
			tool := strings.TrimPrefix(w.activity, protocol.ToolActivityPrefix)
			if s, ok := served[w.callID]; ok {
				return fmt.Sprintf("event %d schedules %s (call %s), but this worker's code served the call from the log (record %d): was %s idempotent when the history was recorded? (likely: its Idempotent flag changed, or a hook now rewrites its arguments)",
					w.event, w.activity, w.callID, s.servedFrom, tool)
			}
			return fmt.Sprintf("event %d schedules %s (call %s), which this worker's code did not run: is %s registered on this worker, and are its hooks the same? (likely: the tool set or the hooks changed)",
				w.event, w.activity, w.callID, tool)
		default:
			c := ran[i]
			tool := strings.TrimPrefix(c.activity, protocol.ToolActivityPrefix)
			return fmt.Sprintf("this worker's code schedules %s (call %s), which the history serves from the log instead: was %s idempotent when the history was recorded? (likely: its Idempotent flag changed)",
				c.activity, c.callID, tool)
		}
	}
	return ""
}
