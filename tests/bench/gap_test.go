package bench

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestMedianCallGapSkipsModelTurns(t *testing.T) {
	base := time.Unix(1000, 0)
	// Completions at 0 (model), 10, 20, 50, 60 ms (tools), 500 ms (model).
	var h historypb.History
	for _, ms := range []int{0, 10, 20, 50, 60, 500} {
		h.Events = append(h.Events, &historypb.HistoryEvent{
			EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
			EventTime: timestamppb.New(base.Add(time.Duration(ms) * time.Millisecond)),
		})
	}
	// Tool gaps: 10, 30, 10 ms: the median is 10 ms.
	if got := medianCallGap(&h); got != 10*time.Millisecond {
		t.Fatalf("median gap %s, want 10ms", got)
	}
}
