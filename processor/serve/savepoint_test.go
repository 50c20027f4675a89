package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/testapp"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/serde"
)

// TestSavepointEndpoint: POST /savepoint is behind the credentials, takes
// only a JSON body (a form, which a browser posts cross-site unasked, is
// refused), requires "to", refuses an existing directory with 409, and
// takes a savepoint of the running wordcount with "continue": its counts
// are every word produced, and the instance goes on processing.
func TestSavepointEndpoint(t *testing.T) {
	addrs := testbroker.Addrs(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p := testbroker.Unique(t, "spe-")
	wc := testapp.WordCount(t, ctx, addrs, p, "127.0.0.1:18098")
	mux := http.NewServeMux()
	Register(mux, wc.App, BearerToken("tok"), Context(ctx))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(token, ctype, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/savepoint", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	wc.Produce(t, 0, "a b", "b c")
	wc.Produce(t, 1, "c d e")
	deadline := time.Now().Add(60 * time.Second)
	for wc.App.Stats().Processed.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("wordcount did not process its input")
		}
		time.Sleep(20 * time.Millisecond)
	}

	dir := filepath.Join(t.TempDir(), "sp")
	body := `{"to": "` + dir + `", "continue": true, "timeout": "40s"}`
	if code, b := post("", "application/json", body); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s", code, b)
	}
	if code, b := post("tok", "application/x-www-form-urlencoded", "to="+dir); code != http.StatusUnsupportedMediaType {
		t.Errorf("a form: %d %s", code, b)
	}
	if code, b := post("tok", "application/json", `{"continue": true}`); code != http.StatusBadRequest || !strings.Contains(b, "is required") {
		t.Errorf("no to: %d %s", code, b)
	}
	if code, b := post("tok", "application/json", `{"to": "`+t.TempDir()+`"}`); code != http.StatusConflict || !strings.Contains(b, "exists") {
		t.Errorf("an existing directory: %d %s", code, b)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("refusals wrote %s: %v", dir, err)
	}

	code, b := post("tok", "application/json", body)
	if code != http.StatusOK {
		t.Fatalf("POST /savepoint: %d %s", code, b)
	}
	var ans savepointAnswer
	if err := json.Unmarshal([]byte(b), &ans); err != nil {
		t.Fatal(err)
	}
	if ans.Dir != dir || ans.Manifest == nil || ans.Manifest.Store("counts") == nil {
		t.Fatalf("answer: %s", b)
	}
	sp, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Verify(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for part := range int32(testapp.Partitions) {
		if err := sp.Each("counts", part, func(k, v []byte) error {
			n, err := serde.Int64.Decode(v)
			got[string(k)] = n
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int64{"a": 1, "b": 2, "c": 2, "d": 1, "e": 1}
	if len(got) != len(want) {
		t.Fatalf("savepoint counts %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("savepoint counts %v, want %v", got, want)
		}
	}
	// With continue, the instance goes on.
	before := wc.App.Stats().Processed.Load()
	wc.Produce(t, 0, "f")
	for wc.App.Stats().Processed.Load() <= before {
		if time.Now().After(deadline) {
			t.Fatal("the instance did not go on after the savepoint")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
