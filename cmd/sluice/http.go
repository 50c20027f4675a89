package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-streams/sluice/plugin/sluiceprom"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/processor/serve"
)

// serveHTTP serves /metrics (the app's own registry), /healthz, /readyz,
// /tasks, /topology, /instances, the interactive queries under /stores/
// and the web console at / (package serve) until the returned stop is called; stop waits for the server. An
// address without a host binds loopback, so nothing is exposed by accident.
func serveHTTP(addr string, app *processor.App, log *slog.Logger) (bound string, stop func(), err error) {
	ln, err := listenHTTP(addr)
	if err != nil {
		return "", nil, err
	}
	return ln.Addr().String(), serveOn(ln, app, nil, log, httpSecurity{}), nil
}

// listenHTTP binds addr (a port alone: on loopback), before the app exists,
// so that its bound address can be the app's advertised endpoint.
func listenHTTP(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = "", addr
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("sluice: --http: %w", err)
	}
	return ln, nil
}

// advertisable is the endpoint other instances can reach a listener at: its
// address, with the host name in place of a wildcard host.
func advertisable(ln net.Listener) string {
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// serveOn serves the endpoints on ln until the returned stop is called.
// /metrics serves reg, on which app's client metrics may already be
// registered (sluiceprom.ClientMetrics); nil: a registry of its own. sec
// says whether over TLS and behind which credentials.
func serveOn(ln net.Listener, app *processor.App, reg *prometheus.Registry, log *slog.Logger, sec httpSecurity) (stop func()) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	reg.MustRegister(sluiceprom.NewCollector(app), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	life, end := context.WithCancel(context.Background()) // ends /instances' Kafka client with the server
	serve.Register(mux, app, append([]serve.Opt{serve.Logger(log), serve.Metrics(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})), serve.Context(life)}, sec.serveOpts()...)...)
	sec.warnExposed(ln.Addr(), log)
	ln = sec.listener(ln)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if sec.tls() {
		// Failed handshakes (a client of another CA, plain HTTP) go to
		// the instance's log, not to stderr unformatted.
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		end()
	}
}
