package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/mcp"
)

// mcpConfig is what the --mcp* flags of a command say: the MCP servers
// whose tools the command's worker offers.
type mcpConfig struct {
	servers []mcpServerFlag // in the order given
	env     []string        // NAME=KEY=VALUE
	headers []string        // NAME=Key: Value
	trust   []string
	prefix  []string
	retry   []string
	idem    []string // NAME=TOOL
	notIdem []string // NAME=TOOL
	checks  []string // NAME=TOOL=CHECK
	approve bool
}

// mcpServerFlag is one --mcp or --mcp-url value.
type mcpServerFlag struct {
	flag, value string
}

// appendFlag is a repeatable flag.
type appendFlag struct {
	add func(string) error
}

func (a appendFlag) String() string     { return "" }
func (a appendFlag) Set(v string) error { return a.add(v) }

// mcpFlags adds the MCP server flags to fs. Commands that run a worker
// take them and pass mcpConfig.open's toolsets to tworker.Options.
func mcpFlags(fs *flagSet) *mcpConfig {
	m := &mcpConfig{}
	list := func(p *[]string) appendFlag {
		return appendFlag{func(v string) error { *p = append(*p, v); return nil }}
	}
	server := func(name string) appendFlag {
		return appendFlag{func(v string) error { m.servers = append(m.servers, mcpServerFlag{name, v}); return nil }}
	}
	fs.Var(server("mcp"), "mcp", "an MCP server the worker runs on stdio: `NAME=COMMAND ARGS...`, one shell-quoted string (repeatable)")
	fs.Var(server("mcp-url"), "mcp-url", "an MCP server over Streamable HTTP: `NAME=URL` (repeatable)")
	fs.Var(list(&m.env), "mcp-env", "an environment variable for a stdio server, which gets only PATH, HOME and a few more of the worker's: `NAME=KEY=VALUE` (repeatable; the value is a secret: never in history)")
	fs.Var(list(&m.headers), "mcp-header", "an HTTP header for a URL server: `NAME=Key: Value` (repeatable; the value is a secret: never in history)")
	fs.Var(list(&m.trust), "mcp-trust", "trust this server's annotations: its idempotentHint makes a tool served on repeat (`NAME`, repeatable)")
	fs.Var(list(&m.retry), "mcp-retry", "a call of this server's tools whose worker was lost runs again (same key) instead of waiting for a person, as an untrusted server's tools that are not served on repeat do (`NAME`, repeatable)")
	fs.Var(list(&m.prefix), "mcp-prefix", "expose this server's tools as NAME_TOOL (`NAME`, repeatable)")
	fs.Var(list(&m.idem), "mcp-idempotent", "serve this tool on repeat, whatever its annotations: `NAME=TOOL` (repeatable)")
	fs.Var(list(&m.notIdem), "mcp-not-idempotent", "run this tool every time, whatever its annotations: `NAME=TOOL` (repeatable)")
	fs.Var(list(&m.checks), "mcp-check", "a lost call of TOOL asks the server's tool CHECK whether it was applied (by key; see docs/unknown.md for what CHECK takes and answers) and runs again only if it was not: `NAME=TOOL=CHECK` (repeatable)")
	fs.BoolVar(&m.approve, "approve-destructive", false, "MCP tools that may be destructive ask a person's approval before each call (every tool of an untrusted server)")
	return m
}

// empty: no server is configured.
func (m *mcpConfig) empty() bool { return len(m.servers) == 0 }

// build turns the flags into server configurations; errors are usage
// errors, and never quote a secret.
func (m *mcpConfig) build() ([]mcp.Server, error) {
	var servers []mcp.Server
	index := map[string]int{}
	for _, f := range m.servers {
		name, rest, ok := strings.Cut(f.value, "=")
		if !ok || name == "" || strings.TrimSpace(rest) == "" {
			if f.flag == "mcp" {
				return nil, usageError{fmt.Sprintf("--mcp %q: want NAME=COMMAND ARGS...", f.value)}
			}
			return nil, usageError{fmt.Sprintf("--mcp-url %q: want NAME=URL", mcp.RedactURL(f.value))}
		}
		if _, dup := index[name]; dup {
			return nil, usageError{fmt.Sprintf("two MCP servers are named %q", name)}
		}
		s := mcp.Server{Name: name, ApproveDestructive: m.approve}
		if f.flag == "mcp" {
			words, err := shellWords(rest)
			if err != nil {
				return nil, usageError{fmt.Sprintf("--mcp %s: %v", name, err)}
			}
			if len(words) == 0 {
				return nil, usageError{fmt.Sprintf("--mcp %s: no command", name)}
			}
			s.Command = words
		} else {
			s.URL = strings.TrimSpace(rest)
		}
		index[name] = len(servers)
		servers = append(servers, s)
	}
	lookup := func(flag, name string) (*mcp.Server, error) {
		i, ok := index[name]
		if !ok {
			return nil, usageError{fmt.Sprintf("--%s: no --mcp or --mcp-url server is named %q", flag, name)}
		}
		return &servers[i], nil
	}
	for _, v := range m.env {
		name, kv, _ := strings.Cut(v, "=")
		key, val, ok := strings.Cut(kv, "=")
		if !ok || key == "" {
			return nil, usageError{fmt.Sprintf("--mcp-env for %q: want NAME=KEY=VALUE", name)}
		}
		s, err := lookup("mcp-env", name)
		if err != nil {
			return nil, err
		}
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		s.Env[key] = val
	}
	for _, v := range m.headers {
		name, kv, _ := strings.Cut(v, "=")
		key, val, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(key) == "" {
			return nil, usageError{fmt.Sprintf("--mcp-header for %q: want NAME=Key: Value", name)}
		}
		s, err := lookup("mcp-header", name)
		if err != nil {
			return nil, err
		}
		if s.Headers == nil {
			s.Headers = map[string]string{}
		}
		s.Headers[strings.TrimSpace(key)] = strings.TrimSpace(val)
	}
	for _, l := range []struct {
		flag  string
		names []string
		set   func(*mcp.Server)
	}{
		{"mcp-trust", m.trust, func(s *mcp.Server) { s.Trust = true }},
		{"mcp-prefix", m.prefix, func(s *mcp.Server) { s.Prefix = true }},
		{"mcp-retry", m.retry, func(s *mcp.Server) { s.OnUnknown = "retry" }},
	} {
		for _, name := range l.names {
			s, err := lookup(l.flag, name)
			if err != nil {
				return nil, err
			}
			l.set(s)
		}
	}
	for _, l := range []struct {
		flag  string
		pairs []string
		add   func(*mcp.Server, string)
	}{
		{"mcp-idempotent", m.idem, func(s *mcp.Server, t string) { s.Idempotent = append(s.Idempotent, t) }},
		{"mcp-not-idempotent", m.notIdem, func(s *mcp.Server, t string) { s.NotIdempotent = append(s.NotIdempotent, t) }},
	} {
		for _, p := range l.pairs {
			name, tool, ok := strings.Cut(p, "=")
			if !ok || tool == "" {
				return nil, usageError{fmt.Sprintf("--%s %q: want NAME=TOOL", l.flag, p)}
			}
			s, err := lookup(l.flag, name)
			if err != nil {
				return nil, err
			}
			l.add(s, tool)
		}
	}
	for _, v := range m.checks {
		name, rest, _ := strings.Cut(v, "=")
		tool, check, ok := strings.Cut(rest, "=")
		if !ok || tool == "" || check == "" {
			return nil, usageError{fmt.Sprintf("--mcp-check %q: want NAME=TOOL=CHECK", v)}
		}
		s, err := lookup("mcp-check", name)
		if err != nil {
			return nil, err
		}
		if s.Checks == nil {
			s.Checks = map[string]string{}
		}
		s.Checks[tool] = check
	}
	for _, s := range servers {
		if err := s.Validate(); err != nil {
			return nil, usageError{err.Error()}
		}
	}
	return servers, nil
}

// open connects to the configured servers and lists their tools, refusing
// a clash with goTools; nil when no server is configured.
func (e *env) openMCP(m *mcpConfig, goTools []string) (*mcp.Set, error) {
	servers, err := m.build()
	if err != nil || len(servers) == 0 {
		return nil, err
	}
	opts := mcp.OpenOptions{GoTools: goTools}
	if e.logLevel(slog.LevelError) <= slog.LevelDebug {
		opts.Stderr = e.stderr // the servers' own logs, on request
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	e.progress("connecting to %d MCP server(s)...", len(servers))
	return mcp.Open(ctx, servers, opts)
}

// toolsets is set's toolsets (none for a nil set).
func toolsets(set *mcp.Set) []tulip.Toolset {
	if set == nil {
		return nil
	}
	return set.Toolsets()
}

// resumeArgs are the flags that give a resumed worker the same servers;
// secrets (--mcp-env, --mcp-header, a URL's userinfo and query values,
// shown as ***) are not repeated: withSecrets says some were given.
func (m *mcpConfig) resumeArgs() (args string, withSecrets bool) {
	var b strings.Builder
	for _, s := range m.servers {
		v := s.value
		if s.flag == "mcp-url" {
			name, u, _ := strings.Cut(v, "=")
			if red := mcp.RedactURL(strings.TrimSpace(u)); red != strings.TrimSpace(u) {
				v = name + "=" + red
				withSecrets = withSecrets || strings.Contains(red, "***")
			}
		}
		fmt.Fprintf(&b, " --%s %s", s.flag, shellQuote(v))
	}
	for _, l := range []struct {
		flag   string
		values []string
	}{{"mcp-trust", m.trust}, {"mcp-prefix", m.prefix}, {"mcp-retry", m.retry}, {"mcp-idempotent", m.idem}, {"mcp-not-idempotent", m.notIdem},
		{"mcp-check", m.checks}} {
		for _, v := range l.values {
			fmt.Fprintf(&b, " --%s %s", l.flag, shellQuote(v))
		}
	}
	if m.approve {
		b.WriteString(" --approve-destructive")
	}
	return b.String(), withSecrets || len(m.env)+len(m.headers) > 0
}

const mcpUsage = "usage: tulip mcp tools --mcp NAME=COMMAND ARGS... | --mcp-url NAME=URL [--mcp-trust NAME] [--mcp-prefix NAME] [--mcp-check NAME=TOOL=CHECK] [--approve-destructive] [--json]"

// mcpCmd is 'tulip mcp tools': each tool of the given servers, its
// annotations, and what tulip does with it.
func (e *env) mcpCmd(args []string) error {
	if len(args) == 0 || (args[0] != "tools" && args[0] != "-h" && args[0] != "--help" && args[0] != "help") {
		return usageError{mcpUsage}
	}
	if args[0] == "tools" {
		args = args[1:]
	}
	fs := e.flags("mcp tools")
	m := mcpFlags(fs)
	asJSON := fs.Bool("json", false, "print the tools as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 || m.empty() {
		return usageError{mcpUsage}
	}
	set, err := e.openMCP(m, nil)
	if err != nil {
		return err
	}
	defer set.Close()
	type row struct {
		Server      string               `json:"server"`
		Tool        string               `json:"tool"`
		MCPName     string               `json:"mcp_name"`
		Annotations *sdk.ToolAnnotations `json:"annotations"`
		Idempotent  bool                 `json:"idempotent"`
		Approval    bool                 `json:"approval"`
		Behaviour   string               `json:"behaviour"`
		Why         string               `json:"why"`
	}
	var rows []row
	for _, ts := range set.Toolsets() {
		infos, err := ts.(*mcp.Toolset).Describe(e.ctx)
		if err != nil {
			return err
		}
		for _, in := range infos {
			rows = append(rows, row{in.Server, in.Spec.Name, in.MCPName, in.Annotations,
				in.Behaviour.Idempotent, in.Behaviour.Approval, in.Behaviour.String(), in.Behaviour.Why})
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTOOL\tANNOTATIONS\tTULIP\tWHY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Server, r.Tool, hints(r.Annotations), r.Behaviour, r.Why)
	}
	return tw.Flush()
}

// hints writes annotations short: the true hints by name, the others that
// are set as name=false ("-" for none).
func hints(a *sdk.ToolAnnotations) string {
	if a == nil {
		return "-"
	}
	var out []string
	if a.ReadOnlyHint {
		out = append(out, "readOnly")
	}
	ptr := func(name string, p *bool) {
		switch {
		case p == nil:
		case *p:
			out = append(out, name)
		default:
			out = append(out, name+"=false")
		}
	}
	ptr("destructive", a.DestructiveHint)
	if a.IdempotentHint {
		out = append(out, "idempotent")
	}
	ptr("openWorld", a.OpenWorldHint)
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// shellWords splits s as a POSIX shell splits a command line, without
// expansions: blanks separate words; 'single quotes' keep everything;
// "double quotes" keep everything but \" \\ \$ \` and a \newline; a
// backslash outside quotes keeps the next character.
func shellWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // a word is started (even an empty one: "")
	)
	r := []rune(s)
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\\':
			in = true
			if i+1 == len(r) {
				return nil, errors.New("a backslash ends the command")
			}
			i++
			if r[i] != '\n' {
				cur.WriteRune(r[i])
			}
		case c == '\'':
			in = true
			j := slices.Index(r[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated ' quote")
			}
			cur.WriteString(string(r[i+1 : i+1+j]))
			i += j + 1
		case c == '"':
			in = true
			i++
			for ; i < len(r) && r[i] != '"'; i++ {
				if r[i] == '\\' && i+1 < len(r) && strings.ContainsRune("\"\\$`\n", r[i+1]) {
					i++
					if r[i] == '\n' {
						continue
					}
				}
				cur.WriteRune(r[i])
			}
			if i == len(r) {
				return nil, errors.New(`unterminated " quote`)
			}
		default:
			in = true
			cur.WriteRune(c)
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
