package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
)

// The annotation -> behaviour table of docs/mcp.md, line by line.
func TestDecide(t *testing.T) {
	idem := &sdk.ToolAnnotations{IdempotentHint: true}
	idemRO := &sdk.ToolAnnotations{IdempotentHint: true, ReadOnlyHint: true}
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true}
	roDestructive := &sdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: bptr(true)}
	additive := &sdk.ToolAnnotations{DestructiveHint: bptr(false)}
	destructive := &sdk.ToolAnnotations{DestructiveHint: bptr(true), IdempotentHint: true}
	silent := &sdk.ToolAnnotations{OpenWorldHint: bptr(false)} // says nothing of destructiveHint
	cases := []struct {
		name           string
		srv            Server
		ann            *sdk.ToolAnnotations
		idem, approval bool
		why            string
	}{
		{"untrusted idempotentHint", Server{}, idem, false, false, "untrusted"},
		{"trusted idempotentHint", Server{Trust: true}, idem, true, false, "trusted idempotentHint"},
		{"trusted idempotentHint on a read-only tool", Server{Trust: true}, idemRO, false, false, "readOnlyHint"},
		{"trusted, no annotations", Server{Trust: true}, nil, false, false, "no idempotentHint"},
		{"untrusted, Idempotent override", Server{Idempotent: []string{"t"}}, nil, true, false, "Idempotent override"},
		{"trusted read-only, Idempotent override", Server{Trust: true, Idempotent: []string{"t"}}, ro, true, false, "Idempotent override"},
		{"NotIdempotent beats a trusted hint", Server{Trust: true, NotIdempotent: []string{"t"}}, idem, false, false, "NotIdempotent"},
		{"override of another tool", Server{Trust: true, NotIdempotent: []string{"other"}}, idem, true, false, "trusted idempotentHint"},

		{"no approval without ApproveDestructive", Server{Trust: true}, destructive, true, false, ""},
		{"trusted destructiveHint", Server{Trust: true, ApproveDestructive: true}, destructive, true, true, "destructive"},
		{"trusted, no annotations: destructive by default", Server{Trust: true, ApproveDestructive: true}, nil, false, true, "destructive"},
		{"trusted, silent on destructiveHint", Server{Trust: true, ApproveDestructive: true}, silent, false, true, "destructive"},
		{"trusted read-only", Server{Trust: true, ApproveDestructive: true}, ro, false, false, "not destructive"},
		{"trusted additive (destructiveHint false)", Server{Trust: true, ApproveDestructive: true}, additive, false, false, "not destructive"},
		{"trusted read-only yet destructiveHint", Server{Trust: true, ApproveDestructive: true}, roDestructive, false, true, "destructive"},
		{"untrusted destructiveHint asks", Server{ApproveDestructive: true}, destructive, false, true, "untrusted"},
		{"untrusted read-only still asks", Server{ApproveDestructive: true}, ro, false, true, "untrusted"},
		{"untrusted additive still asks", Server{ApproveDestructive: true}, additive, false, true, "untrusted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.srv.Decide("t", c.ann)
			hold := !c.srv.Trust && !c.idem // the default: an untrusted tool not served on repeat holds if lost
			assert.Equal(t, hold, b.OnUnknown == "hold", "on unknown (%s)", b.Why)
			assert.Equal(t, c.idem, b.Idempotent, "idempotent (%s)", b.Why)
			assert.Equal(t, c.approval, b.Approval, "approval (%s)", b.Why)
			assert.Contains(t, b.Why, c.why)
		})
	}
}

func TestBehaviourString(t *testing.T) {
	assert.Equal(t, "runs every time", Behaviour{}.String())
	assert.Equal(t, "runs every time; holds if lost", Behaviour{OnUnknown: "hold"}.String())
	assert.Equal(t, "served on repeat", Behaviour{Idempotent: true}.String())
	assert.Equal(t, "asks approval; served on repeat", Behaviour{Idempotent: true, Approval: true}.String())
}

// Every invalid configuration is one line naming the server and field.
func TestValidate(t *testing.T) {
	ok := Server{Name: "fs", Command: []string{"node", "x.js"}}
	cases := []struct {
		name string
		mod  func(*Server)
		want string
	}{
		{"ok", func(*Server) {}, ""},
		{"url ok", func(s *Server) {
			s.Command, s.URL, s.Headers = nil, "https://x/mcp", map[string]string{"Authorization": "Bearer x"}
		}, ""},
		{"no name", func(s *Server) { s.Name = "" }, `Name must be 1-64`},
		{"bad name", func(s *Server) { s.Name = "f.s" }, `server "f.s": Name must be`},
		{"long name", func(s *Server) { s.Name = strings.Repeat("n", 65) }, `Name must be`},
		{"nothing to run", func(s *Server) { s.Command = nil }, `give Command (stdio), URL (Streamable HTTP) or Transport`},
		{"both", func(s *Server) { s.URL = "http://x" }, `only one of Command, URL and Transport`},
		{"empty program", func(s *Server) { s.Command = []string{""} }, `Command the program is empty`},
		{"bad url", func(s *Server) { s.Command, s.URL = nil, "ftp://x" }, `URL must start with http://`},
		{"env without command", func(s *Server) { s.Command, s.URL, s.Env = nil, "http://x", map[string]string{"A": "b"} }, `Env is for a Command server`},
		{"bad env name", func(s *Server) { s.Env = map[string]string{"A=B": "c"} }, `variable name "A=B"`},
		{"headers without url", func(s *Server) { s.Headers = map[string]string{"A": "b"} }, `Headers are for a URL server`},
		{"bad header name", func(s *Server) { s.Command, s.URL, s.Headers = nil, "http://x", map[string]string{"A B": "c"} }, `header name "A B"`},
		{"header value with a newline", func(s *Server) {
			s.Command, s.URL, s.Headers = nil, "http://x", map[string]string{"X-Key": "sec\nret-value"}
		}, `the value of header "X-Key" holds a line break`},
		{"both lists", func(s *Server) { s.Idempotent, s.NotIdempotent = []string{"a"}, []string{"a"} }, `tool "a" is also in NotIdempotent`},
		{"prefix too long", func(s *Server) { s.Name, s.Prefix = strings.Repeat("n", 63), true }, `too long to prefix`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ok
			c.mod(&s)
			err := s.Validate()
			if c.want == "" {
				assert.NoError(t, err)
				return
			}
			var ce *ConfigError
			if assert.ErrorAs(t, err, &ce) {
				assert.Contains(t, err.Error(), c.want)
				assert.NotContains(t, err.Error(), "\n")
				assert.NotContains(t, err.Error(), "ret-value", "a header value is a secret")
			}
		})
	}
}

// Server.OnUnknown chooses for every tool of the server; its zero value
// holds an untrusted server's tools that are not served on repeat.
func TestDecideOnUnknown(t *testing.T) {
	for _, c := range []struct {
		srv  Server
		want string
	}{
		{Server{}, "hold"},
		{Server{Idempotent: []string{"t"}}, ""},
		{Server{Trust: true}, ""},
		{Server{OnUnknown: "retry"}, ""},
		{Server{Trust: true, OnUnknown: "hold"}, "hold"},
	} {
		assert.Equal(t, c.want, c.srv.Decide("t", nil).OnUnknown, "%+v", c.srv)
	}
	err := Server{Name: "s", Command: []string{"x"}, OnUnknown: "check"}.Validate()
	var ce *ConfigError
	assert.ErrorAs(t, err, &ce)
	assert.Equal(t, "OnUnknown", ce.Field)
}
