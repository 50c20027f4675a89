package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluice-streams/sluice/processor"
)

// Opt configures the endpoints.
type Opt interface{ apply(*config) }

type opt func(*config)

func (o opt) apply(c *config) { o(c) }

type config struct {
	log     *slog.Logger
	client  *http.Client
	metrics http.Handler
	ctx     context.Context // Context; nil: none
	auth    auth            // see auth.go
}

// Logger takes the logger queries that fail unexpectedly are reported to.
// Default: slog.Default().
func Logger(l *slog.Logger) Opt { return opt(func(c *config) { c.log = l }) }

// Client takes the HTTP client that forwards queries to other instances.
// Default: a client with a 10 s timeout.
func Client(cl *http.Client) Opt { return opt(func(c *config) { c.client = cl }) }

// Metrics mounts h at GET /metrics (e.g. promhttp over a registry holding
// sluiceprom's collector: Prometheus stays out of this package). Default:
// no /metrics.
func Metrics(h http.Handler) Opt { return opt(func(c *config) { c.metrics = h }) }

func newConfig(opts []Opt) config {
	c := config{log: slog.Default(), client: &http.Client{Timeout: 10 * time.Second}}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// Register mounts every endpoint on mux: /healthz, /readyz, /tasks,
// /topology, /instances (the group's instances, tasks and lag, from Kafka),
// POST /savepoint (App.TakeSavepoint), /metrics (with Metrics) and the
// interactive queries
// (RegisterQueries). With BearerToken or ClientCAs they are mounted behind
// the credentials (Guard), with /login, reached through the pattern "/" of
// mux (which must then be free; more specific patterns of the program's
// own stay its own).
func Register(mux *http.ServeMux, app *processor.App, opts ...Opt) {
	c := newConfig(opts)
	mux = c.guarded(mux)
	if c.metrics != nil {
		mux.Handle("GET /metrics", c.metrics)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		st := app.Status()
		if !st.Ready {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, st)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("GET /tasks", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, app.Status().Tasks) })
	mux.HandleFunc("GET /topology", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, app.Topology().Description())
	})
	newQueryHandler(app, c).register(mux)
	newInstancesHandler(app, c).register(mux) // GET /instances (instances.go)
	registerSavepoint(mux, app)               // POST /savepoint (savepoint.go)
	registerConsole(mux, app, c)              // the web console at /, with /stats, /deadletters and /app (console.go)
}

// RegisterQueries mounts only the interactive queries on mux:
//
//	GET /stores/{store}/keys/{key}                      a key's value; of a window store, its windows (?from=&to=)
//	GET /stores/{store}/keys?from=&to=&limit=&after=    a page of keys in byte order of their encoding
//
// With BearerToken or ClientCAs they are mounted behind the credentials.
func RegisterQueries(mux *http.ServeMux, app *processor.App, opts ...Opt) {
	c := newConfig(opts)
	newQueryHandler(app, c).register(c.guarded(mux))
}

// writeJSON writes v indented, as every endpoint answers.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
