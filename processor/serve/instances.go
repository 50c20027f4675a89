package serve

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/groupview"
	"github.com/sluice-streams/sluice/processor"
)

// Context bounds the life of what the endpoints hold beyond a request:
// when ctx is done, GET /instances closes its Kafka client and answers 503
// from then on. `sluice run --http` cancels it when its server stops.
// Default: none; the client lives as long as the process.
func Context(ctx context.Context) Opt { return opt(func(c *config) { c.ctx = ctx }) }

// instancesTTL is how long an /instances answer is reused: consoles polling
// every second from several tabs cost the cluster one describe a second.
const instancesTTL = time.Second

// instancesTimeout bounds one describe (three round trips to the cluster).
const instancesTimeout = 10 * time.Second

// instancesHandler serves GET /instances: the application's group as
// internal/groupview describes it, from Kafka alone, so that an instance
// shows every instance (and their lag) whether or not their HTTP ports are
// reachable from here.
//
// Lock order: mu (the cache; held across a describe, so that concurrent
// requests wait for one describe and share it) before clMu (the client).
type instancesHandler struct {
	app *processor.App
	ttl time.Duration

	mu struct {
		sync.Mutex
		at   time.Time // when view was described; zero: nothing cached
		view groupview.View
	}
	clMu struct {
		sync.Mutex
		cl     *kgo.Client // made at the first request, kept until close
		closed bool
	}
}

func newInstancesHandler(app *processor.App, c config) *instancesHandler {
	h := &instancesHandler{app: app, ttl: instancesTTL}
	if c.ctx != nil {
		// AfterFunc starts its goroutine only once ctx is done; close
		// then ends a describe in flight (the client is closed under it).
		context.AfterFunc(c.ctx, h.close)
	}
	return h
}

func (h *instancesHandler) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /instances", h.serve)
}

// client returns the handler's client, made on first use; nil once closed.
func (h *instancesHandler) client() (*kgo.Client, error) {
	h.clMu.Lock()
	defer h.clMu.Unlock()
	if h.clMu.closed {
		return nil, nil
	}
	if h.clMu.cl == nil {
		cl, err := h.app.NewClient()
		if err != nil {
			return nil, err
		}
		h.clMu.cl = cl
	}
	return h.clMu.cl, nil
}

// close closes the client; later requests answer 503. Idempotent.
func (h *instancesHandler) close() {
	h.clMu.Lock()
	defer h.clMu.Unlock()
	h.clMu.closed = true
	if h.clMu.cl != nil {
		h.clMu.cl.Close()
		h.clMu.cl = nil
	}
}

// serve answers the view: 200 with it (an application whose group does not
// exist yet is state "Dead" with no instances), 503 with Retry-After when
// the cluster does not answer or the server is stopping.
func (h *instancesHandler) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clMu.Lock()
	closed := h.clMu.closed
	h.clMu.Unlock()
	if closed {
		unavailable(w, "serve: instances: the server is stopping")
		return
	}
	if !h.mu.at.IsZero() && time.Since(h.mu.at) < h.ttl {
		writeJSON(w, http.StatusOK, h.mu.view)
		return
	}
	cl, err := h.client()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "serve: instances: " + err.Error()})
		return
	}
	if cl == nil { // closed since the check above
		unavailable(w, "serve: instances: the server is stopping")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), instancesTimeout)
	defer cancel()
	v, err := groupview.Describe(ctx, cl, h.app.ApplicationID())
	if err != nil && !errors.Is(err, groupview.ErrNoGroup) {
		unavailable(w, "serve: instances: "+err.Error())
		return
	}
	h.mu.at, h.mu.view = time.Now(), v
	writeJSON(w, http.StatusOK, v)
}
