package soak

import (
	"bytes"
	"net/http"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/agentrun"
	"github.com/tulip-temporal/tulip/internal/demo/witness"
)

// servedButRan is the served-but-ran control: an Observer that, when the
// dedup interceptor serves a call from the log (no activity scheduled), runs
// the call's side effect anyway, straight at its service, naming the served
// call. The execution log is right; only the witnesses see it.
type servedButRan struct {
	billing, pager string
}

func (o *servedButRan) Decision(d agentrun.Decision) {
	if d.Outcome != agentrun.OutcomeCached {
		return
	}
	var url, body string
	switch d.Tool {
	case "issue_refund":
		url, body = o.billing+"/refunds", `{"order_id": "served-but-ran", "amount": 1}`
	case "page_oncall":
		url, body = o.pager+"/pages", `{"case_id": "served-but-ran", "summary": "served, ran anyway"}`
	default:
		return
	}
	w := witness.Request{Tool: d.Tool, Call: d.CallID, Key: "served-but-ran-" + d.KeyHash, Workflow: d.WorkflowID, Run: d.RunID, Attempt: 1}
	go func() { // an Observer must not block the workflow
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		witness.Set(req, w)
		hc := &http.Client{Timeout: 10 * time.Second}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
}

func (o *servedButRan) ModelCall(agentrun.ModelCall) {}

// converters are the data and failure converters for keyFile's keys (none:
// payloads as written).
func converters(keyFile string) (converter.DataConverter, converter.FailureConverter, error) {
	if keyFile == "" {
		dc, fc := (*codec.Keyring)(nil).Converters(nil) // no keys: names an encrypted payload's key
		return dc, fc, nil
	}
	keys, err := codec.LoadKeyFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	dc, fc := keys.Converters(nil)
	return dc, fc, nil
}
