package activities

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// ExtendDigest returns the digest of a conversation whose prefix has digest
// d, followed by msgs: d' = SHA-256(d || SHA-256(JSON(msg))) for each
// message, in hex. The empty conversation's digest is "".
func ExtendDigest(d string, msgs ...Message) string {
	for _, m := range msgs {
		b, _ := json.Marshal(m) // a struct of strings, bools and slices: never fails
		mh := sha256.Sum256(b)
		h := sha256.New()
		h.Write([]byte(d))
		h.Write(mh[:])
		d = hex.EncodeToString(h.Sum(nil))
	}
	return d
}

// ConversationRange asks QueryConversation for messages [From, To).
type ConversationRange struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// ConversationPage is QueryConversation's answer: messages from the range's
// From, at most about ConversationPageBytes of them (at least one), and
// Next, where the next page starts.
type ConversationPage struct {
	Messages []Message `json:"messages"`
	Next     int       `json:"next"`
}

// ConversationPageBytes bounds a conversation page (a query answer must fit
// in a gRPC message).
const ConversationPageBytes = 1 << 20

// DefaultCacheNodes is the node count of NewModels' cache.
const DefaultCacheNodes = 4096

// ConversationCache keeps recent conversations by digest. A conversation is
// a chain of nodes, each holding the messages one model call added, so
// conversations that share a prefix share its nodes: one long run is held
// once, not once per turn. Safe for concurrent use.
type ConversationCache struct {
	mu    sync.Mutex
	max   int
	nodes map[string]*list.Element // digest → element of order (a *convNode)
	order *list.List               // oldest first
}

type convNode struct {
	parent *convNode
	msgs   []Message
	count  int
	digest string
}

// NewConversationCache returns a cache of at most max nodes (max <= 0:
// DefaultCacheNodes). Evicted nodes stay alive while a cached node
// descends from them.
func NewConversationCache(max int) *ConversationCache {
	if max <= 0 {
		max = DefaultCacheNodes
	}
	return &ConversationCache{max: max, nodes: map[string]*list.Element{}, order: list.New()}
}

func (c *ConversationCache) get(digest string) *convNode {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.nodes[digest]; ok {
		c.order.MoveToBack(e)
		return e.Value.(*convNode)
	}
	return nil
}

func (c *ConversationCache) put(n *convNode) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.nodes[n.digest]; ok {
		c.order.MoveToBack(e)
		return
	}
	c.nodes[n.digest] = c.order.PushBack(n)
	for c.order.Len() > c.max {
		old := c.order.Remove(c.order.Front()).(*convNode)
		delete(c.nodes, old.digest)
	}
}

// Len is the number of cached nodes.
func (c *ConversationCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (n *convNode) flatten() []Message {
	if n == nil {
		return nil
	}
	out := make([]Message, n.count)
	for ; n != nil; n = n.parent {
		copy(out[n.count-len(n.msgs):], n.msgs)
	}
	return out
}

// conversation rebuilds in's whole conversation, checks its digest, and
// fills in the content of served messages that refer to another (ContentIn).
func (m *Models) conversation(ctx context.Context, in ModelInput) ([]Message, error) {
	var base *convNode
	if in.Base != nil && in.Base.Count > 0 {
		base = m.Cache.get(in.Base.Digest)
		if base == nil || base.count != in.Base.Count {
			msgs, err := m.fetchBase(ctx, in.Base)
			if err != nil {
				return nil, err
			}
			if d := ExtendDigest("", msgs...); d != in.Base.Digest {
				return nil, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("the run's conversation (%d messages) does not match the model call's digest", len(msgs)), ErrConversation, nil)
			}
			base = &convNode{msgs: msgs, count: len(msgs), digest: in.Base.Digest}
			m.Cache.put(base)
		}
	}
	d := ""
	count := 0
	if base != nil {
		d, count = base.digest, base.count
	}
	d = ExtendDigest(d, in.New...)
	if d != in.Digest {
		return nil, temporal.NewNonRetryableApplicationError("the model call's new messages do not match its digest", ErrConversation, nil)
	}
	n := &convNode{parent: base, msgs: in.New, count: count + len(in.New), digest: d}
	m.Cache.put(n)
	msgs := n.flatten()
	if err := ResolveContent(msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}

// remember caches in's conversation followed by the model's answer.
func (m *Models) remember(in ModelInput, answer Message) {
	parent := m.Cache.get(in.Digest)
	if parent == nil {
		return
	}
	m.Cache.put(&convNode{parent: parent, msgs: []Message{answer}, count: parent.count + 1, digest: ExtendDigest(in.Digest, answer)})
}

// fetchConversation reads the first count messages of the calling run's
// conversation: from the run itself, and from the runs that hold its
// earlier parts (QueryPage). Queries add nothing to history.
func fetchConversation(ctx context.Context, count int) ([]Message, error) {
	info := activity.GetInfo(ctx)
	return FetchMessages(ctx, activity.GetClient(ctx), info.WorkflowExecution.ID, info.WorkflowExecution.RunID, 0, count)
}
