package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/savepoint"
)

// savepointRequest is POST /savepoint's body.
type savepointRequest struct {
	// To is the directory to write, on the machine of the instance that
	// answers; it must not exist.
	To string `json:"to"`
	// Continue lets the instances go on afterwards; else they stop, this
	// one included.
	Continue bool `json:"continue"`
	// Timeout is a Go duration ("60s"); default
	// processor.DefaultSavepointTimeout.
	Timeout string `json:"timeout,omitempty"`
}

// savepointAnswer is POST /savepoint's answer: where everything went.
type savepointAnswer struct {
	Dir      string              `json:"dir"`
	Continue bool                `json:"continue"`
	Manifest *savepoint.Manifest `json:"manifest"`
}

// maxSavepointBody bounds POST /savepoint's body.
const maxSavepointBody = 64 << 10

// registerSavepoint mounts POST /savepoint: take a savepoint of the
// application (processor.App.TakeSavepoint), as `sluice savepoint create`
// does. The body is JSON with Content-Type application/json, never a form:
// a browser sends a form to another site without asking, but JSON only
// after a preflight this server does not grant, so no page a user visits
// can stop the application.
func registerSavepoint(mux *http.ServeMux, app *processor.App) {
	mux.HandleFunc("POST /savepoint", func(w http.ResponseWriter, r *http.Request) {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": `serve: POST /savepoint takes a JSON body ({"to": DIR, "continue": false, "timeout": "60s"}) with Content-Type application/json`})
			return
		}
		var req savepointRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, maxSavepointBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("serve: POST /savepoint: body: %v", err)})
			return
		}
		if req.To == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": `serve: POST /savepoint: "to" (the directory to write) is required`})
			return
		}
		var opts []processor.Opt
		if req.Timeout != "" {
			d, err := time.ParseDuration(req.Timeout)
			if err != nil || d <= 0 {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("serve: POST /savepoint: timeout %q is not a positive Go duration", req.Timeout)})
				return
			}
			opts = append(opts, processor.SavepointTimeout(d))
		}
		if req.Continue {
			opts = append(opts, processor.SavepointContinue())
		}
		m, err := app.TakeSavepoint(r.Context(), req.To, opts...)
		switch {
		case errors.Is(err, savepoint.ErrExists):
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, savepointAnswer{Dir: req.To, Continue: req.Continue, Manifest: m})
		}
	})
}
