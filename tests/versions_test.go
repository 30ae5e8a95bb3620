package tests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip/internal/demo"
	"github.com/tulip-temporal/tulip/internal/runclient"
	"github.com/tulip-temporal/tulip/internal/scenario"
)

// versionGates lists the change IDs of a history's version markers, and
// counts its search-attribute upserts (the SDK upserts
// TemporalChangeVersion with each marker: a visibility write).
func versionGates(t *testing.T, hist *historypb.History) ([]string, int) {
	var gates []string
	upserts := 0
	for _, e := range hist.GetEvents() {
		if m := e.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "Version" {
			var id string
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(&commonpb.Payloads{Payloads: m.GetDetails()["change-id"].GetPayloads()}, &id))
			gates = append(gates, id)
		}
		if e.GetUpsertWorkflowSearchAttributesEventAttributes() != nil {
			upserts++
		}
	}
	return gates, upserts
}

// A new run records one version gate, tulip-baseline, and with it one
// upsert of TemporalChangeVersion, whatever it does: the changes the
// baseline covers take their versions from it (internal/agentrun
// versions.go). Counted in the server's history of a run that runs calls
// at once and serves one, and in the checked-in history of the refund
// story (TestRecordHistories records it with the current code). The control: the
// same story recorded before the baseline (v5/) has a gate, and an upsert,
// for each change it met.
func TestOneVersionGate(t *testing.T) {
	c := dial(t, server.Address())
	h, res := runScript(t, c, demo.NewToolbox(), scenario.Run{Turns: []scenario.Turn{
		turn(call("c1", "issue_refund", refund), call("c2", "lookup_order", `{"order_id": "ord-4821"}`)),
		turn(call("c3", "issue_refund", refund), call("c4", "mint_case_id", "{}")),
	}}, runclient.RunOptions{})
	require.Equal(t, "completed", string(res.Status))
	gates, upserts := versionGates(t, history(t, c, h.WorkflowID, h.RunID))
	assert.Equal(t, []string{"tulip-baseline"}, gates)
	assert.Equal(t, 1, upserts)

	for dir, want := range map[string][]string{
		"":   {"tulip-baseline"},
		"v5": {"tulip-thread-state", "tulip-state-by-ref", "tulip-parallel-calls"},
	} {
		b, err := os.ReadFile(filepath.Join(historiesDir, dir, "refund-story-run1.json"))
		require.NoError(t, err)
		var hist historypb.History
		require.NoError(t, temporalproto.CustomJSONUnmarshalOptions{}.Unmarshal(b, &hist))
		gates, upserts := versionGates(t, &hist)
		assert.Equal(t, want, gates, "%s/refund-story-run1.json", dir)
		assert.Equal(t, len(want), upserts, "%s/refund-story-run1.json", dir)
	}
}
