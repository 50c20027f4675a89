package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestComposeHealthcheckCommand runs `sluice healthcheck`, the compose
// file's healthcheck of the replicas, against a server that answers 200 on
// /ok and 503 on /readyz.
func TestComposeHealthcheckCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "want GET", http.StatusMethodNotAllowed)
			return
		}
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("ok\n"))
		case "/readyz":
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"ready": false}`, http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	// A port nothing listens on: bound, then closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	for _, c := range []struct {
		url  string
		want string // "" for success
	}{
		{srv.URL + "/ok", ""},
		{srv.URL + "/readyz", "503"},
		{srv.URL + "/missing", "404"},
		{"http://" + closed + "/readyz", "refused"},
		{"", "--url is required"},
		{"127.0.0.1:9100/readyz", "want http://host:port/path"},
	} {
		_, err := runSluice(testCtx(t), "healthcheck", "--url", c.url)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want success", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: err = %v, want one containing %q", c.url, err, c.want)
		}
	}
	// The body of a failed answer is in the error: readyz explains itself.
	if _, err := runSluice(testCtx(t), "healthcheck", "--url", srv.URL+"/readyz"); err == nil || !strings.Contains(err.Error(), `"ready": false`) {
		t.Errorf("err = %v, want the body in it", err)
	}
}
