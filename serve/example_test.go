package serve_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/serve"
)

// The API in a plain net/http server, behind the company's own
// authentication: here a header its gateway sets after checking the
// user's token (any function of the request will do: OIDC, JWT, mTLS).
func Example() {
	// A client of your Temporal server; workers with the tulip plugin
	// poll "support-agents" (NewLazyClient connects on first use).
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	api, err := serve.NewHandler(c, serve.Options{
		TaskQueue: "support-agents",
		Agents:    []string{"support"},
		IDKey:     []byte("a secret of at least 16 bytes, the same on every instance"),
		Tenant: func(r *http.Request) (string, error) {
			if org := r.Header.Get("X-Verified-Org"); org != "" {
				return org, nil // threads belong to the organisation
			}
			return "", errors.New("sign in first")
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	srv := httptest.NewServer(mux) // http.Server{Handler: mux, MaxHeaderBytes: 1 << 20} in production
	defer srv.Close()

	for _, org := range []string{"acme", ""} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/models", nil)
		req.Header.Set("X-Verified-Org", org)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
	}
	// Output:
	// 200 {"data":[{"created":0,"id":"support","object":"model","owned_by":"tulip"}],"object":"list"}
	// 401 {"error":{"code":"invalid_api_key","message":"sign in first","param":null,"type":"invalid_request_error"}}
}
