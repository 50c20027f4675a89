package serve

import (
	"embed"
	"net/http"

	"github.com/sluice-streams/sluice/processor"
)

// The web console (DESIGN.md "Web console"): plain ES modules and CSS in
// console/, embedded in the binary and served as they are: no build step,
// no CDN, nothing fetched from anywhere but this instance, so the page
// works with the network cut off. The page reads the JSON endpoints with
// relative URLs: GET /tasks, /topology, /instances (if mounted), /stores/…,
// and the console's own GET /stats, /deadletters and /app.
//
//go:embed console
var consoleFS embed.FS

// consoleCSP keeps the page to this origin: a script or style that tried
// to load from elsewhere would be refused, not fetched.
const consoleCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// appInfo is the JSON of GET /app: what the console needs to name the
// application's topics.
type appInfo struct {
	ApplicationID    string            `json:"application_id"`
	Endpoint         string            `json:"endpoint,omitempty"`
	DeadLetterTopics []string          `json:"dead_letter_topics"`
	Changelogs       map[string]string `json:"changelogs"` // store → topic
}

// registerConsole mounts the console at / (the page) and /console/ (its
// assets), with GET /stats, /deadletters and /app.
func registerConsole(mux *http.ServeMux, app *processor.App, _ config) {
	// The embedded paths start with console/, as the URLs do.
	mux.Handle("GET /console/", consoleHeaders(http.FileServerFS(consoleFS)))
	mux.Handle("GET /{$}", consoleHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, consoleFS, "console/index.html")
	})))
	s := newSampler(app.Stats())
	mux.HandleFunc("GET /stats", s.serveStats)
	d := &deadLetters{app: app, timeout: deadLetterTimeout}
	mux.HandleFunc("GET /deadletters", d.serve)
	mux.HandleFunc("GET /app", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, appInfo{
			ApplicationID: app.ApplicationID(), Endpoint: app.Endpoint(),
			DeadLetterTopics: app.DeadLetterTopics(), Changelogs: app.ChangelogTopics(),
		})
	})
}

// consoleHeaders sets the headers of the console's files: the CSP, and
// revalidation on every load so a new binary's page is never mixed with
// the old one's modules.
func consoleHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", consoleCSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}
