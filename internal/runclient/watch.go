package runclient

import (
	"bytes"
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/internal/agentrun"
)

// WatchInterrupts has Await see interrupts through one visibility listing
// a tick for every run this process awaits on a client (the runs' memos,
// up to WatchBatch runs a ListWorkflowExecutions), in place of a describe
// of each run each tick. Describes still come, from WatchedPollInterval on
// (they see what a listing does not: a workflow task that keeps failing);
// while the listings fail (a server without the SQL-like queries, a
// visibility rate limit) Await asks as it does without the watch.
var WatchInterrupts = true

// WatchBatch is how many runs one listing asks about.
const WatchBatch = 100

// WatchedPollInterval is how soon, and at most how often, Await describes
// a run the watch lists: what the watch does not see.
var WatchedPollInterval = 4 * time.Second

// watchFailedFor is how long the watch stays off after a listing failed.
const watchFailedFor = 10 * time.Second

// watchListTimeout bounds a listing, the client's retries of it included
// (a rate limit is retried): past it, the watch is off.
const watchListTimeout = 2 * time.Second

// watches holds one watch a client.
var watches sync.Map // client.Client -> *watch

// watch lists, while any Await uses it, the running runs of the workflow
// IDs it holds, and wakes a watcher when its run's interrupt memo changes.
type watch struct {
	c    client.Client
	mu   sync.Mutex
	runs map[string][]*watcher // by workflow ID
	// fresh: a watcher was added since the last tick (the next tick comes
	// at PollInterval, not later).
	fresh      bool
	running    bool
	failedTill time.Time
}

// watcher is one Await's place in a watch.
type watcher struct {
	w    *watch
	id   string
	wake chan struct{} // cap 1: the memo changed, or the watch failed
	seen []byte        // the memo's payload last listed (nil: none)
}

// watchRun adds a watcher for workflowID to c's watch; nil when the run
// cannot be watched (WatchInterrupts off, an ID the query cannot quote, a
// client that cannot key a map).
func watchRun(c client.Client, workflowID string) *watcher {
	if !WatchInterrupts || workflowID == "" || strings.ContainsAny(workflowID, `'"\`) || strings.ContainsFunc(workflowID, func(r rune) bool { return r < ' ' }) ||
		c == nil || !reflect.TypeOf(c).Comparable() {
		return nil
	}
	v, _ := watches.LoadOrStore(c, &watch{c: c, runs: map[string][]*watcher{}})
	w := v.(*watch)
	wr := &watcher{w: w, id: workflowID, wake: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs[workflowID] = append(w.runs[workflowID], wr)
	w.fresh = true
	if !w.running {
		w.running = true
		go w.loop()
	}
	return wr
}

// remove takes the watcher out of its watch.
func (wr *watcher) remove() {
	if wr == nil {
		return
	}
	w := wr.w
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.runs[wr.id]
	if i := slices.Index(list, wr); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(w.runs, wr.id)
	} else {
		w.runs[wr.id] = list
	}
}

// woken is the channel a change is told on (nil for no watcher: never).
func (wr *watcher) woken() <-chan struct{} {
	if wr == nil {
		return nil
	}
	return wr.wake
}

// listing reports whether the watch's listings currently answer (false
// for no watcher).
func (wr *watcher) listing() bool {
	if wr == nil {
		return false
	}
	wr.w.mu.Lock()
	defer wr.w.mu.Unlock()
	return wr.w.answering()
}

// answering reports whether the last listing did not fail within
// watchFailedFor. The caller holds w.mu.
func (w *watch) answering() bool {
	return !time.Now().Before(w.failedTill)
}

func (wr *watcher) notify() {
	select {
	case wr.wake <- struct{}{}:
	default:
	}
}

// loop lists the watch's runs each tick: PollInterval after a watcher was
// added or a memo changed, twice as long each quiet tick up to
// MaxPollInterval. It ends when no watcher is left.
func (w *watch) loop() {
	wait := PollInterval
	for {
		time.Sleep(wait)
		w.mu.Lock()
		if len(w.runs) == 0 {
			w.running = false
			// A watchRun that found w meanwhile adds to it and starts
			// its loop again; the next finds a new watch.
			watches.CompareAndDelete(w.c, w)
			w.mu.Unlock()
			return
		}
		fresh := w.fresh
		w.fresh = false
		var ids []string
		if w.answering() { // else this tick lists nothing
			ids = slices.Collect(maps.Keys(w.runs))
		}
		w.mu.Unlock()
		changed := false
		if len(ids) > 0 {
			changed = w.list(ids)
		}
		if fresh || changed {
			wait = PollInterval
		} else {
			wait = min(2*wait, longestPoll())
		}
	}
}

// list asks about ids, WatchBatch at a time, and wakes the watchers whose
// run's memo changed. A listing that fails turns the watch off for
// watchFailedFor and wakes every watcher (their Awaits ask on their own).
func (w *watch) list(ids []string) bool {
	changed := false
	for len(ids) > 0 {
		batch := ids[:min(len(ids), WatchBatch)]
		ids = ids[len(batch):]
		memos, err := w.memos(batch)
		w.mu.Lock()
		if err != nil {
			w.failedTill = time.Now().Add(watchFailedFor)
			for _, list := range w.runs {
				for _, wr := range list {
					wr.notify()
				}
			}
			w.mu.Unlock()
			return true
		}
		for _, id := range batch {
			m := memos[id]
			for _, wr := range w.runs[id] {
				if !bytes.Equal(m, wr.seen) {
					wr.seen = m
					wr.notify()
					changed = true
				}
			}
		}
		w.mu.Unlock()
	}
	return changed
}

// memos lists the running runs of ids and returns each one's interrupt
// memo payload, as stored (a codec's, encrypted; no entry: no memo).
func (w *watch) memos(ids []string) (map[string][]byte, error) {
	var q strings.Builder
	q.WriteString("WorkflowId IN (")
	for i, id := range ids {
		if i > 0 {
			q.WriteString(",")
		}
		q.WriteString("'" + id + "'")
	}
	q.WriteString(") AND ExecutionStatus = 'Running'")
	ctx, cancel := context.WithTimeout(context.Background(), watchListTimeout)
	defer cancel()
	out := map[string][]byte{}
	var token []byte
	for {
		resp, err := w.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q.String(), PageSize: int32(len(ids)), NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			if p := e.GetMemo().GetFields()[agentrun.MemoInterrupt]; p != nil {
				out[e.GetExecution().GetWorkflowId()] = p.GetData()
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}
