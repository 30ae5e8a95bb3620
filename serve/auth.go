package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Who may call the API, and whose threads they reach (docs/serve.md,
// "Security"): Options.Tenant names a request's tenant (BearerTokens: a
// bearer token names it), and every thread belongs to the tenant that
// made it. Without it there is one tenant, and only clients that name
// Options.Addr as their Host and are not a browser page of another origin
// get in.

var tenantRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

type tenantKey struct{}

func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// tenantOf is the tenant a request authenticated as.
func tenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// authenticate finds the request's tenant (Options.Tenant), or answers
// 401.
func (a *apiServer) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	if a.tenant == nil {
		return DefaultTenant, true
	}
	tenant, err := a.tenant(r)
	if err == nil && !tenantRE.MatchString(tenant) {
		err = fmt.Errorf("the tenant %q is not 1-64 of A-Z a-z 0-9 . _ -", tenant)
	}
	if err != nil {
		apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "", err.Error())
		return "", false
	}
	return tenant, true
}

// BearerTokens is a Tenant function for Options: the request's bearer
// token (Authorization: Bearer TOKEN) names its tenant in tokens (token →
// tenant). Every token is compared in constant time.
func BearerTokens(tokens map[string]string) func(*http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		got = strings.TrimSpace(got)
		tenant := ""
		for token, t := range tokens {
			if subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
				tenant = t
			}
		}
		if !ok || tenant == "" {
			return "", errBadToken
		}
		return tenant, nil
	}
}

var errBadToken = errors.New("missing or wrong bearer token (Authorization: Bearer TOKEN)")

// admit refuses what a browser page of another origin could send: a
// foreign Origin (unless --allow-origin lists it), a Host that is not this
// server (DNS rebinding) when no token is needed, and a POST whose body is
// not JSON (a "simple" cross-origin request needs no preflight). It
// answers an allowed origin's CORS headers.
func (a *apiServer) admit(w http.ResponseWriter, r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		if !slices.Contains(a.origins, strings.TrimRight(origin, "/")) && !a.sameOrigin(origin) {
			apiError(w, http.StatusForbidden, "invalid_request_error", "origin_not_allowed", "",
				fmt.Sprintf("requests from the origin %s are not allowed (tulip serve --allow-origin lists the origins that are)", origin))
			return false
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", ThreadHeader+", Retry-After")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, "+ThreadHeader+", "+r.Header.Get("Access-Control-Request-Headers"))
			h.Set("Access-Control-Max-Age", "600")
		}
	}
	if a.tenant == nil && !a.hostAllowed(r.Host) {
		apiError(w, http.StatusForbidden, "invalid_request_error", "host_not_allowed", "",
			fmt.Sprintf("the Host %q is not this server's address (%s)", r.Host, a.addr))
		return false
	}
	if r.Method == http.MethodPost {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			apiError(w, http.StatusUnsupportedMediaType, "invalid_request_error", "unsupported_media_type", "",
				"the body must be JSON (Content-Type: application/json)")
			return false
		}
	}
	return true
}

// sameOrigin: origin is this server's own (a page it served, were it to).
// A server on every interface (--insecure on 0.0.0.0) has no origin of
// its own: any host reaches it, so a page's origin proves nothing, and
// only --allow-origin's origins are let in.
func (a *apiServer) sameOrigin(origin string) bool {
	if lhost, _, err := net.SplitHostPort(a.addr); err != nil || net.ParseIP(lhost) == nil || net.ParseIP(lhost).IsUnspecified() {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && a.hostAllowed(u.Host)
}

// hostAllowed: host (a Host header) names this server: its listen address,
// or a loopback name with its port. A server listening on every interface
// (--insecure) takes any host.
func (a *apiServer) hostAllowed(host string) bool {
	lhost, lport, err := net.SplitHostPort(a.addr)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(lhost); ip != nil && ip.IsUnspecified() {
		return true
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h, p = host, "80"
	}
	if p != lport {
		return false
	}
	h = strings.Trim(h, "[]")
	if h == lhost || strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback() && net.ParseIP(lhost) != nil && net.ParseIP(lhost).IsLoopback()
}

func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Path == "" && u.RawQuery == ""
}
