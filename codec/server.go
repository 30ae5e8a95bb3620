package codec

import (
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// HandlerOptions configures Handler. The zero value serves the codec with
// no cross-origin access.
type HandlerOptions struct {
	// AllowOrigins are the browser origins (scheme://host:port, as the
	// browser sends them in Origin) allowed to call the codec: the Web UI's
	// address. "*" allows any origin. Zero value: none (same-origin and
	// non-browser clients only).
	AllowOrigins []string
	// AllowCredentials lets the browser send cookies and the Authorization
	// header (the UI's codec.includeCredentials / passAccessToken). It is
	// ignored when AllowOrigins holds "*": any page could then use the
	// user's credentials.
	AllowCredentials bool
	// AllowEncode serves POST /encode. Zero value: refused (403). The
	// Web UI reads with /decode; /encode lets any caller encrypt a guess
	// and compare it with stored ciphertext (the codec is deterministic),
	// so serve it only to callers you trust with that.
	AllowEncode bool
}

// Handler serves the Temporal codec-server protocol (POST /encode and POST
// /decode, JSON {"payloads": [...]}) with this keyring, with CORS for the
// Web UI. A payload it cannot decrypt gives HTTP 400 with the KeyError's
// text.
func (k *Keyring) Handler(opts HandlerOptions) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(k)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			if !opts.allowed(origin) {
				http.Error(w, "codec: origin "+origin+" is not allowed", http.StatusForbidden)
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			if opts.AllowCredentials && !slices.Contains(opts.AllowOrigins, "*") {
				h.Set("Access-Control-Allow-Credentials", "true")
			}
			if r.Method == http.MethodOptions {
				if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
					// A hosted UI calling a codec server on this machine.
					h.Set("Access-Control-Allow-Private-Network", "true")
				}
				h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization, Authorization-Extras, Caller-Type")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST, OPTIONS")
			http.Error(w, "codec: use POST /encode or POST /decode", http.StatusMethodNotAllowed)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/encode") && !opts.AllowEncode {
			http.Error(w, "codec: /encode is off (start the codec server with --allow-encode)", http.StatusForbidden)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

func (o HandlerOptions) allowed(origin string) bool {
	return slices.Contains(o.AllowOrigins, "*") || slices.ContainsFunc(o.AllowOrigins, func(a string) bool {
		return strings.EqualFold(strings.TrimSuffix(a, "/"), origin)
	})
}
