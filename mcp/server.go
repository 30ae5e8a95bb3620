package mcp

import (
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server configures one MCP server: how to reach it and how far tulip trusts
// it. Give exactly one of Command, URL or Transport.
type Server struct {
	// Name names the server and its toolset: 1-64 of [A-Za-z0-9_-], unique
	// among a worker's toolsets. Required.
	Name string
	// Command runs a stdio server as a child process of the worker:
	// program, then arguments. Zero value: not a stdio server.
	Command []string
	// Env is Command's environment beyond a minimal default: the worker's
	// HOME, LOGNAME, PATH, SHELL, TERM, USER, LANG, LC_ALL, LC_CTYPE,
	// TMPDIR and TZ when set (on Windows, the variables a program needs
	// to run), and nothing else of the worker's environment, trusted
	// server or not (it holds the worker's own secrets). Env wins over the
	// default. Its values are secrets (never in a spec, an error or a
	// result). Zero value: the default alone.
	Env map[string]string
	// URL is a Streamable HTTP server's endpoint. Its userinfo
	// (user:password@, sent as basic auth) and its query values
	// (?token=...) are secrets: only the URL's redacted form (RedactURL)
	// is ever put in an error, a spec or a result. Zero value: not an HTTP
	// server.
	URL string
	// Headers are sent on every HTTP request to URL (an Authorization
	// header, say). Their values are secrets. Zero value: none.
	Headers map[string]string
	// Transport connects through a transport of your own instead (an
	// in-process server over sdk.NewInMemoryTransports, say); it is called
	// for every connection, the first and each one after a failure. Zero
	// value: use Command or URL.
	Transport func() (sdk.Transport, error)
	// Prefix exposes the tools as NAME_TOOL, so that servers offering the
	// same tool name can be used together. Zero value: tools keep their
	// MCP names.
	Prefix bool
	// Trust makes the server's idempotentHint and destructiveHint count.
	// Zero value: untrusted; its tools run every time unless listed in
	// Idempotent, and with ApproveDestructive every tool asks approval.
	Trust bool
	// Idempotent lists tools (by MCP name) served on repeat whatever their
	// annotations say. Zero value: none.
	Idempotent []string
	// NotIdempotent lists tools (by MCP name) that run every time whatever
	// their annotations or Idempotent say. Zero value: none.
	NotIdempotent []string
	// ApproveDestructive makes every call of a destructive tool wait for a
	// person's approval (see the package doc for which tools are). Zero
	// value: no tool of this server asks approval.
	ApproveDestructive bool
	// OnUnknown is what a run does with a call of this server's tools
	// whose worker was lost mid-call (tulip.ToolSpec.OnUnknown): "hold"
	// (wait for a person) or "retry" (Temporal runs it again, with the
	// same key). Zero value: "hold" for an untrusted server's tools that
	// are not idempotent, "retry" for the rest.
	OnUnknown string
	// Checks names, for a tool (by MCP name), a tool of the same server
	// that says whether a call of it was applied (see the package doc
	// for the convention it follows). A lost call of the tool is then
	// asked about (tulip.ToolSpec.OnUnknown "check", whatever OnUnknown
	// says): its answer is the call's outcome, and the call runs again,
	// with the same key, only when it was not applied. Both tools must be
	// listed by the server. Zero value: no tool is checked.
	Checks map[string]string
}

// nameRE is a tulip tool name, and a server name.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate checks the configuration; the error is one line naming the
// server and the field (a *ConfigError).
func (s Server) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{Server: s.Name, Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	if !nameRE.MatchString(s.Name) {
		return bad("Name", "must be 1-64 letters, digits, '_' or '-'")
	}
	n := 0
	if len(s.Command) > 0 {
		n++
		if s.Command[0] == "" {
			return bad("Command", "the program is empty")
		}
	}
	if s.URL != "" {
		n++
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return bad("URL", "must start with http:// or https://")
		}
		// The parse error would quote the URL: it is not given.
		if u, err := url.Parse(s.URL); err != nil || u.Host == "" {
			return bad("URL", "is not a valid URL (%s)", RedactURL(s.URL))
		}
	}
	if s.Transport != nil {
		n++
	}
	switch {
	case n == 0:
		return bad("Command", "give Command (stdio), URL (Streamable HTTP) or Transport")
	case n > 1:
		return bad("Command", "give only one of Command, URL and Transport")
	}
	if len(s.Env) > 0 && len(s.Command) == 0 {
		return bad("Env", "is for a Command server")
	}
	switch s.OnUnknown {
	case "", "retry", "hold":
	default:
		return bad("OnUnknown", "must be \"retry\" or \"hold\" (a tool's check is named in Checks)")
	}
	for tool, check := range s.Checks {
		switch {
		case tool == "" || check == "":
			return bad("Checks", "names an empty tool")
		case tool == check:
			return bad("Checks", "tool %q cannot check itself", tool)
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("Env", "variable name %q is not valid", k)
		}
	}
	if len(s.Headers) > 0 && s.URL == "" {
		return bad("Headers", "are for a URL server")
	}
	for k, v := range s.Headers {
		if !validHeaderName(k) {
			return bad("Headers", "header name %q is not valid", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return bad("Headers", "the value of header %q holds a line break", k)
		}
	}
	for _, t := range s.Idempotent {
		if slices.Contains(s.NotIdempotent, t) {
			return bad("Idempotent", "tool %q is also in NotIdempotent", t)
		}
	}
	if s.Prefix && len(s.Name)+2 > 64 {
		return bad("Prefix", "the name is too long to prefix tool names (at most 62 characters)")
	}
	return nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// ToolName is the name tulip gives the server's MCP tool mcpName.
func (s Server) ToolName(mcpName string) string {
	if s.Prefix {
		return s.Name + "_" + mcpName
	}
	return mcpName
}

// redactor redacts the server's secrets: its URL whole wherever it is
// spelled out, and each secret value.
func (s Server) redactor() redactor {
	var whole []string
	for _, f := range urlForms(s.URL) {
		whole = append(whole, f, RedactURL(s.URL))
	}
	return newRedactor(s.secrets(), whole...)
}

// secrets are the values that must never leave the package.
func (s Server) secrets() []string {
	out := urlSecrets(s.URL)
	for _, v := range s.Env {
		out = append(out, v)
	}
	for _, v := range s.Headers {
		out = append(out, v)
		// "Bearer TOKEN": the token alone may be echoed too.
		if _, tok, ok := strings.Cut(v, " "); ok {
			out = append(out, strings.TrimSpace(tok))
		}
	}
	return out
}

// RedactURL is raw as it may be shown: scheme://host/path, with "***" for
// the userinfo and for each query value (the keys are kept), and without
// the fragment. A value that does not parse as a URL is "***" whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return "***"
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	out := r.String()
	if u.User != nil {
		out = strings.Replace(out, "//", "//***@", 1)
	}
	if u.RawQuery != "" {
		var keys []string
		for _, kv := range strings.Split(u.RawQuery, "&") {
			k, _, _ := strings.Cut(kv, "=")
			if k != "" {
				keys = append(keys, k+"=***")
			}
		}
		out += "?" + strings.Join(keys, "&")
	}
	return out
}

// urlSecrets are the secret parts of a server URL: the user, the password
// and every query value, as written and decoded.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil {
		return nil
	}
	var out []string
	add := func(v string) {
		out = append(out, v)
		if d, err := url.QueryUnescape(v); err == nil && d != v {
			out = append(out, d)
		}
	}
	if u.User != nil {
		// As written: between "//" and the authority's last '@'.
		authority := raw[strings.Index(raw, "//")+2:]
		if i := strings.IndexAny(authority, "/?#"); i >= 0 {
			authority = authority[:i]
		}
		userinfo := authority[:max(strings.LastIndex(authority, "@"), 0)]
		user, pass, _ := strings.Cut(userinfo, ":")
		add(user)
		add(pass)
		out = append(out, u.User.Username())
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		if _, v, ok := strings.Cut(kv, "="); ok && v != "" {
			add(v)
		}
	}
	return out
}

// urlForms are the ways an error may spell the URL out, each replaced
// whole by its redacted form, whatever the length of its secrets: as
// written, as net/url prints it, with the password as "xxxxx"
// (url.URL.Redacted) or as "***" (net/http's errors), with or without the
// fragment.
func urlForms(raw string) []string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || (u.User == nil && u.RawQuery == "" && u.Fragment == "") {
		return nil
	}
	forms := []string{raw}
	for _, f := range []bool{true, false} {
		v := *u
		if !f {
			v.Fragment, v.RawFragment = "", ""
		}
		forms = append(forms, v.String(), v.Redacted())
		if _, ok := v.User.Password(); ok {
			forms = append(forms, strings.Replace(v.String(), v.User.String()+"@", v.User.Username()+":***@", 1))
		}
	}
	return forms
}

// Options tune a Toolset. Zero values are documented per field.
type Options struct {
	// ListTTL is how long a tool list is kept before Tools lists again,
	// when the server gives no ttlMs hint (servers before protocol
	// 2026-07-28). A server's ttlMs always wins. Negative: list every
	// time. Zero value: 5 minutes.
	ListTTL time.Duration
	// ConnectTimeout bounds one connection (spawning a stdio server and the
	// MCP handshake), within the caller's context. Zero value: 30 seconds.
	ConnectTimeout time.Duration
	// CloseTimeout is how long Close waits for a stdio server to exit after
	// closing its stdin, before SIGTERM (and as long again before SIGKILL).
	// Zero value: 5 seconds.
	CloseTimeout time.Duration
	// Stderr receives a stdio server's standard error. Zero value:
	// discarded.
	Stderr io.Writer
}

// DefaultListTTL is Options.ListTTL's zero value.
const DefaultListTTL = 5 * time.Minute

// DefaultConnectTimeout is Options.ConnectTimeout's zero value.
const DefaultConnectTimeout = 30 * time.Second

func (o Options) listTTL() time.Duration {
	if o.ListTTL == 0 {
		return DefaultListTTL
	}
	return o.ListTTL
}

func (o Options) connectTimeout() time.Duration {
	if o.ConnectTimeout <= 0 {
		return DefaultConnectTimeout
	}
	return o.ConnectTimeout
}
