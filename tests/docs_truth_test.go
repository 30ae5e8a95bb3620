package tests

import (
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip/agent"
)

// The docs say what the code does (issue 55, "docs that disagree with the
// code"): every field docs/api.md's log table names is a field of
// agent.Record; go doc agent.Decline names the outcome the trace shows;
// docs/threads.md does not promise a thread never starts empty.
func TestDocsTellTheTruth(t *testing.T) {
	api, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	doc := string(api)
	start := strings.Index(doc, "## The log")
	require.Positive(t, start)
	table := doc[start:]
	table = table[strings.Index(table, "| field"):]
	table = table[:strings.Index(table, "\n\n")]
	fields := map[string]bool{}
	rt := reflect.TypeOf(agent.Record{})
	for i := range rt.NumField() {
		fields[rt.Field(i).Name] = true
	}
	names := 0
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`([A-Za-z]+)(\\(\\))?`").FindAllStringSubmatch(cells[1], -1) {
			if m[1] == "field" {
				continue
			}
			names++
			assert.True(t, fields[m[1]], "docs/api.md's log table names %s, which agent.Record lacks", m[0])
		}
	}
	assert.Greater(t, names, 8, "sanity: the table was read")

	out, err := exec.Command("go", "doc", "github.com/tulip-temporal/tulip/agent.Decline").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), string(agent.Dropped), "go doc agent.Decline names the trace's outcome")
	assert.NotContains(t, string(out), "dangling")

	threads, err := os.ReadFile("../docs/threads.md")
	require.NoError(t, err)
	assert.NotContains(t, string(threads), "It never starts empty", "without a store, a thread whose runs are all gone starts empty")
}
