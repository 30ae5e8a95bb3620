package devserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// UIOptions configures StartUI: the Temporal Web UI, served from the
// assets embedded in github.com/temporalio/ui-server/v2 (no network, no npm
// build).
type UIOptions struct {
	// Host is the IP the UI binds; it must be a loopback address. Zero
	// value: 127.0.0.1.
	Host string
	// Port is the UI's HTTP port. Zero value: a free port. The Temporal
	// CLI's convention is the frontend port + 1000 (8233 for 7233); UIPort
	// computes it.
	Port int
	// Frontend is the Temporal frontend's host:port. Required.
	Frontend string
	// Namespace is the UI's default namespace. Zero value: "default".
	Namespace string
	// CodecEndpoint is a codec server's URL (for example the one
	// codec.Keyring.Handler serves): the browser sends payloads there to
	// show them decoded. Zero value: payloads are shown as stored.
	CodecEndpoint string
}

// UIPort is the Temporal CLI's UI port for a frontend port: port + 1000.
func UIPort(frontendPort int) int { return frontendPort + 1000 }

// UI is a running Web UI server.
type UI struct {
	srv  *uiserver.Server
	url  string
	once sync.Once
}

// URL is the UI's address, http://host:port.
func (u *UI) URL() string { return u.url }

// Stop stops the UI server. It is safe to call more than once.
func (u *UI) Stop() { u.once.Do(u.srv.Stop) }

// CheckPort returns an error wrapping ErrPortInUse when host:port cannot
// be bound now. The UI server exits the process when its port is taken,
// so check it before starting anything.
func CheckPort(host string, port int, flag string) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%w: %s:%d (choose another with %s)", ErrPortInUse, host, port, flag)
	}
	return l.Close()
}

// StartUI validates the options, checks the port, starts the UI server,
// and returns once it accepts connections. Its news fetch and version check are
// off (no network is needed), and its logs are hidden.
func StartUI(opts UIOptions) (*UI, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if ip := net.ParseIP(opts.Host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("devserver: UI host %q is not a loopback IP address", opts.Host)
	}
	if opts.Frontend == "" {
		return nil, errors.New("devserver: UIOptions.Frontend is required")
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	switch {
	case opts.Port < 0 || opts.Port > 65535:
		return nil, fmt.Errorf("devserver: UI port %d is out of range", opts.Port)
	case opts.Port == 0:
		p, err := freePort(opts.Host)
		if err != nil {
			return nil, err
		}
		opts.Port = p
	default:
		if err := CheckPort(opts.Host, opts.Port, "--ui-port"); err != nil {
			return nil, err
		}
	}
	cfg := &uiconfig.Config{
		Host:                opts.Host,
		Port:                opts.Port,
		TemporalGRPCAddress: opts.Frontend,
		EnableUI:            true,
		DefaultNamespace:    opts.Namespace,
		DisableNewsFetch:    true,
		NotifyOnNewVersion:  false,
		HideLogs:            true,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		Codec:               uiconfig.Codec{Endpoint: opts.CodecEndpoint},
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("devserver: UI config: %w", err)
	}
	srv := uiserver.NewServer(uioptions.WithConfigProvider(cfg))
	go func() { _ = srv.Start() }()
	u := &UI{srv: srv, url: "http://" + net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))}
	if err := waitReachable("UI", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), 10*time.Second); err != nil {
		u.Stop()
		return nil, err
	}
	return u, nil
}
