package agentrun

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The agent tag is bounded: a worker's list of agents, others "other"; with
// no list, the first DefaultMetricAgentLimit names, then "other".
func TestMetricAgentTagBound(t *testing.T) {
	listed := newAgentTags([]string{"support", "billing"})
	assert.Equal(t, "support", listed.tag("support"))
	assert.Equal(t, OtherTag, listed.tag("anything-a-client-sends"))

	capped := newAgentTags(nil)
	for i := range DefaultMetricAgentLimit {
		assert.Equal(t, fmt.Sprint("a", i), capped.tag(fmt.Sprint("a", i)))
	}
	assert.Equal(t, OtherTag, capped.tag("one-too-many"))
	assert.Equal(t, "a7", capped.tag("a7"), "a name seen before the bound keeps its tag")
}

// A numbered kind (a run's trace lines) is remembered by its highest
// number: a retried task's emissions up to it stay out, the next go out,
// and each run and kind counts on its own; the worker's memory holds one
// entry per run and kind, not one per emission.
func TestEmittedNumbered(t *testing.T) {
	e := newEmitted()
	for n := range 5 {
		assert.True(t, e.firstNumbered("run-a/line/#", n))
	}
	for n := 2; n < 5; n++ {
		assert.False(t, e.firstNumbered("run-a/line/#", n), "line %d again (a retried task)", n)
	}
	assert.True(t, e.firstNumbered("run-a/line/#", 5))
	assert.True(t, e.firstNumbered("run-b/line/#", 0), "another run counts on its own")
	assert.True(t, e.firstNumbered("run-a/model/#", 1), "another kind counts on its own")
	assert.True(t, e.first("run-a/continue-as-new"))
	assert.False(t, e.first("run-a/continue-as-new"))
	assert.Len(t, e.seen, 4)
	assert.Len(t, e.order, 4)
}
