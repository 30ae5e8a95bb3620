package activities

import (
	"container/list"
	"sync"

	"github.com/tulip-temporal/tulip/internal/threadstate"
)

// DefaultCacheNodes is the node count of NewModels' cache.
const DefaultCacheNodes = 4096

// DefaultCacheBytes is the byte bound of NewModels' cache: the messages it
// keeps alive (their text: contents, tool calls' arguments, ids) add up to
// at most this.
const DefaultCacheBytes = 64 << 20

// ConversationCache keeps recent conversations by digest. A conversation is
// a chain of nodes, each holding the messages one model call added, so
// conversations that share a prefix share its nodes: one long run is held
// once, not once per turn. It is bounded by nodes and by bytes: the bytes
// are those of every node it keeps alive, the nodes it holds and their
// ancestors (an evicted node stays alive while a node it holds descends
// from it, and counts until none does). Least recently used nodes go
// first. A conversation evicted is read again from its run (a query, no
// history event) by the next model call that needs it. Safe for concurrent
// use.
type ConversationCache struct {
	mu       sync.Mutex
	max      int
	maxBytes int64
	bytes    int64                    // of the nodes held (cached, or an ancestor of one)
	nodes    map[string]*list.Element // digest → element of order (a *convNode)
	order    *list.List               // oldest first
}

type convNode struct {
	parent *convNode
	msgs   []threadstate.Message
	count  int
	digest string
	size   int64 // msgs' bytes (messageBytes)
	// refs counts what holds the node in the cache: itself cached (1),
	// and each held child. Zero: not counted in the cache's bytes.
	refs int
}

// messageBytes is about what msgs keep alive: their text and a little for
// each message and call.
func messageBytes(msgs []threadstate.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += 64 + int64(len(m.Role)+len(m.Content)+len(m.ToolCallID))
		for _, c := range m.ToolCalls {
			n += 48 + int64(len(c.ID)+len(c.Name)+len(c.Arguments))
		}
	}
	return n
}

func newNode(parent *convNode, msgs []threadstate.Message, count int, digest string) *convNode {
	return &convNode{parent: parent, msgs: msgs, count: count, digest: digest, size: messageBytes(msgs)}
}

// NewConversationCache returns a cache of at most max nodes (max <= 0:
// DefaultCacheNodes) and DefaultCacheBytes bytes.
func NewConversationCache(max int) *ConversationCache {
	return NewConversationCacheBytes(max, 0)
}

// NewConversationCacheBytes returns a cache of at most maxNodes nodes
// (<= 0: DefaultCacheNodes) keeping at most maxBytes bytes of messages
// alive (<= 0: DefaultCacheBytes). A conversation larger than maxBytes is
// not kept: each model call of its run reads it from the run.
func NewConversationCacheBytes(maxNodes int, maxBytes int64) *ConversationCache {
	if maxNodes <= 0 {
		maxNodes = DefaultCacheNodes
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &ConversationCache{max: maxNodes, maxBytes: maxBytes, nodes: map[string]*list.Element{}, order: list.New()}
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
	c.hold(n)
	for c.order.Len() > 0 && (c.order.Len() > c.max || c.bytes > c.maxBytes) {
		old := c.order.Remove(c.order.Front()).(*convNode)
		delete(c.nodes, old.digest)
		c.release(old)
	}
}

// hold adds a holder to n: a node held for the first time counts its
// bytes, and holds its parent.
func (c *ConversationCache) hold(n *convNode) {
	for ; n != nil; n = n.parent {
		n.refs++
		if n.refs > 1 {
			return
		}
		c.bytes += n.size
	}
}

// release takes a holder from n: a node no longer held stops counting,
// and releases its parent.
func (c *ConversationCache) release(n *convNode) {
	for ; n != nil; n = n.parent {
		n.refs--
		if n.refs > 0 {
			return
		}
		c.bytes -= n.size
	}
}

// Len is the number of cached nodes.
func (c *ConversationCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Bytes is the bytes of messages the cache keeps alive (at most its byte
// bound once a put returns).
func (c *ConversationCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

func (n *convNode) flatten() []threadstate.Message {
	if n == nil {
		return nil
	}
	out := make([]threadstate.Message, n.count)
	for ; n != nil; n = n.parent {
		copy(out[n.count-len(n.msgs):], n.msgs)
	}
	return out
}
