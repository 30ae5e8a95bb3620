package witness

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

func TestSetAndFromRequest(t *testing.T) {
	cases := []Request{
		{Tool: "page_oncall", Call: "t1k2-c", Key: "tulip-abc", Workflow: "wf", Run: "run-1", Attempt: 3},
		{Tool: "issue_refund", Call: "t0k0-a", Key: "refund:ord-0:10:v1", Run: "run-2", Attempt: 1},
		{Tool: "x", Call: "", Key: "", Run: "", Attempt: 0},
	}
	for _, w := range cases {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/x", nil)
		Set(req, w)
		got := FromRequest("pager", req)
		if got.At.IsZero() || got.Service != "pager" {
			t.Fatalf("service and time not set: %+v", got)
		}
		got.Service, got.At = "", w.At
		if got != w {
			t.Fatalf("round trip: %+v, want %+v", got, w)
		}
	}
}

func TestSetHeadersOutsideATool(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/x", nil)
	if err := SetHeaders(context.Background(), req); !errors.Is(err, ErrNoCall) {
		t.Fatalf("err %v, want ErrNoCall", err)
	}
}

func TestLog(t *testing.T) {
	var l Log
	for k := range 3 {
		l.Add(Request{Call: string(rune('a' + k))})
	}
	if l.Len() != 3 || l.Requests()[2].Call != "c" {
		t.Fatalf("log %v", l.Requests())
	}
}
