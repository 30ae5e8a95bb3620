package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"

	tulipotel "github.com/tulip-temporal/tulip/otel"
)

// metricsServer serves Prometheus /metrics on loopback for a Temporal
// metrics handler: the SDK's metrics and tulip's (tulip_tool_calls_total,
// tulip_served_calls_total, ...), through OpenTelemetry's Prometheus
// exporter.
type metricsServer struct {
	handler client.MetricsHandler
	url     string
	srv     *http.Server
	mp      *sdkmetric.MeterProvider
}

// startMetrics listens on 127.0.0.1:port (0: a free port) first, so that a
// taken port fails before anything starts.
func startMetrics(port int) (*metricsServer, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("metrics port %d: %w", port, errors.Unwrap(err))
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{handler: tulipotel.NewMetricsHandler(mp.Meter("tulip")), url: "http://" + ln.Addr().String() + "/metrics",
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, mp: mp}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

func (m *metricsServer) Close() {
	_ = m.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.mp.Shutdown(ctx)
}
