package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip/codec"
	"github.com/tulip-temporal/tulip/internal/keyfile"
)

// codecServer is a codec endpoint on loopback (or the host given).
type codecServer struct {
	srv *http.Server
	url string
}

func startCodecServer(keys *codec.Keyring, host string, port int, opts codec.HandlerOptions) (*codecServer, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("codec server: cannot listen on %s:%d: %v (choose another with --port)", host, port, errors.Unwrap(err))
	}
	srv := &http.Server{Handler: keys.Handler(opts), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &codecServer{srv: srv, url: "http://" + l.Addr().String()}, nil
}

func (c *codecServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.srv.Shutdown(ctx)
}

// codecServerCmd serves the codec endpoint for a Web UI elsewhere.
func (e *env) codecServerCmd(args []string) error {
	fs := e.flags("codec-server")
	var keyFile string
	e.codecFlag(fs, &keyFile)
	host := fs.String("host", "127.0.0.1", "address to bind")
	port := fs.Int("port", 8081, "port to bind (0: a free one)")
	origins := fs.String("allow-origin", "http://localhost:8233,http://127.0.0.1:8233", "comma-separated browser origins of the Web UI allowed to call it (\"*\": any)")
	creds := fs.Bool("allow-credentials", false, "let the browser send cookies and its Authorization header (the UI's codec includeCredentials / passAccessToken)")
	encode := fs.Bool("allow-encode", false, "serve POST /encode too (off: with a deterministic codec it lets callers test guesses against stored ciphertext)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"usage: tulip codec-server --codec-key-file FILE [--host H] [--port N] [--allow-origin URL,...]"}
	}
	keys, err := e.keys(keyFile)
	if err != nil {
		return err
	}
	if *creds && strings.Contains(*origins, "*") {
		return usageError{"--allow-credentials with --allow-origin '*' would let any web page use your credentials: name the UI's origin"}
	}
	if ip := net.ParseIP(*host); ip == nil || !ip.IsLoopback() {
		e.progress("warning: the codec server decrypts for anyone who can reach %s; it has no authentication of its own: keep it behind your network's access control", *host)
	}
	if keys == nil {
		return usageError{"codec-server needs keys: give --codec-key-file FILE (or TULIP_CODEC_KEY_FILE)"}
	}
	var allow []string
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allow = append(allow, o)
		}
	}
	cs, err := startCodecServer(keys, *host, *port, codec.HandlerOptions{AllowOrigins: allow, AllowCredentials: *creds, AllowEncode: *encode})
	if err != nil {
		return err
	}
	defer cs.Close()
	served := "POST /decode; /encode off"
	if *encode {
		served = "POST /encode, POST /decode"
	}
	fmt.Fprintf(e.stdout, "codec server: %s (%s); keys %s, %q encrypts\n", cs.url, served, strings.Join(keys.KeyIDs(), ", "), keys.KeyIDs()[0])
	fmt.Fprintf(e.stdout, "allowed UI origins: %s\n", strings.Join(allow, ", "))
	fmt.Fprintf(e.stdout, "in the Web UI: Data Encoder settings, endpoint %s (or the UI server's codec.endpoint)\n", cs.url)
	fmt.Fprintln(e.stdout, "Ctrl-C stops it.")
	<-e.ctx.Done()
	return nil
}

// keygen prints a key file line with a fresh random key, or appends it to
// a key file of mode 0600.
func (e *env) keygen(args []string) error {
	fs := e.flags("keygen")
	out := fs.String("o", "", "append the line to this key file (created with mode 0600) instead of printing it")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"usage: tulip keygen KEY_ID [-o keys.txt]"}
	}
	line, err := keyfile.NewLine(fs.Arg(0))
	if err != nil {
		return err
	}
	if *out == "" {
		fmt.Fprintln(e.stdout, line)
		return nil
	}
	if err := keyfile.Append(*out, line); err != nil {
		return err
	}
	if w := keyfile.Warning(*out); w != "" {
		e.progress("%s", w)
	}
	e.progress("added key %q to %s", fs.Arg(0), *out)
	return nil
}

// converters are the data and failure converters of every client and
// replayer: encrypting with keys, or, with none, refusing an encrypted
// payload by its key id.
func converters(keys *codec.Keyring) (converter.DataConverter, converter.FailureConverter) {
	if keys != nil {
		return keys.Converters(nil)
	}
	return (*codec.Keyring)(nil).Converters(nil) // no keys: names an encrypted payload's key
}

// decodeHistory decodes every payload of hist in place with pc (search
// attributes are never encoded).
func decodeHistory(ctx context.Context, hist *historypb.History, pc converter.PayloadCodec) error {
	return proxy.VisitPayloads(ctx, hist, proxy.VisitPayloadsOptions{
		Visitor: func(_ *proxy.VisitPayloadsContext, p []*commonpb.Payload) ([]*commonpb.Payload, error) {
			return pc.Decode(p)
		},
		SkipSearchAttributes: true,
	})
}
