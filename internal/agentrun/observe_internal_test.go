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
