package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/internal/testbroker"
)

// TestResetDeletesExactlyTheAppsInternalTopics runs reset for an application
// whose id contains '-' and whose stores and repartition topics are named
// adversarially (ending in the suffixes themselves), next to the topics of
// applications with similar ids, its dead-letter topic and user topics that
// contain the suffixes: exactly the application's internal topics go.
func TestResetDeletesExactlyTheAppsInternalTopics(t *testing.T) {
	const app = "my-app"
	internal := []string{
		names.Changelog(app, "counts"),
		names.Changelog(app, "c-changelog"),
		names.Changelog(app, "r-repartition"),
		names.Internal(app, names.Repartition("by-user")),
		names.Internal(app, names.Repartition("r-repartition")),
		names.Internal(app, names.Repartition("c-changelog")),
		names.Changelog(app, names.TimeStore(names.Repartition("by-user"))),
	}
	untouched := []string{
		names.DeadLetter(app),
		app,
		app + "-counts",
		app + "-changelog-out",
		app + "-by-user-repartition-time",
		"my-apps-counts-changelog",
		names.Changelog("my", "counts"),
		names.Internal("other-app", names.Repartition("by-user")),
		"counts-changelog",
	}
	addrs := testbroker.Addrs(t)
	ctx := testCtx(t)
	for _, tp := range append(slices.Clone(internal), untouched...) {
		if err := broker.CreateTopic(ctx, addrs, tp, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	f := &resetFixture{addr: addrs[0], appID: app}
	if _, err := f.reset(t); err != nil {
		t.Fatalf("reset: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f.adm = kadm.NewClient(cl)
	left := f.existing(t)
	for _, tp := range internal {
		if slices.Contains(left, tp) {
			t.Errorf("internal topic %s still exists", tp)
		}
	}
	for _, tp := range untouched {
		if !slices.Contains(left, tp) {
			t.Errorf("topic %s was deleted; it is not an internal topic of %s", tp, app)
		}
	}
}

// TestResetStateDirSharedWithTheInstance: reset refuses while the lock an
// instance takes (statedir.Lock, as processor.App.Run does) is held, and
// once it is released removes exactly the application's directory, not
// those of applications whose ids extend or contain it, nor files beside it.
func TestResetStateDirSharedWithTheInstance(t *testing.T) {
	const app = "my-app"
	f := &resetFixture{addr: testbroker.Addrs(t)[0], appID: app, stateRoot: t.TempDir()}
	mine := statedir.App(f.stateRoot, app)
	others := []string{"my-app-2", "my", "my-app.old", "app", "my-app-"}
	for _, a := range append([]string{app}, others...) {
		d := statedir.Store(statedir.App(f.stateRoot, a), "0_0", "counts")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "data"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.stateRoot, "my-app.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	unlock, err := statedir.Lock(mine)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.reset(t, "--state-dir", f.stateRoot); err == nil || !strings.Contains(err.Error(), "in use by a running instance") {
		t.Fatalf("reset while an instance holds the lock: %v, want a refusal", err)
	}
	if _, err := os.Stat(statedir.Store(mine, "0_0", "counts")); err != nil {
		t.Fatalf("the refused reset touched the state: %v", err)
	}
	unlock()
	if _, err := f.reset(t, "--state-dir", f.stateRoot); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if _, err := os.Stat(mine); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists: %v", mine, err)
	}
	for _, a := range others {
		if _, err := os.Stat(statedir.Store(statedir.App(f.stateRoot, a), "0_0", "counts")); err != nil {
			t.Errorf("application %s's state was touched: %v", a, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.stateRoot, "my-app.txt")); err != nil {
		t.Errorf("a file beside the application's directory was touched: %v", err)
	}
	// Application ids that would name another directory are refused.
	for _, bad := range []string{"..", ".", "a/b", "../" + app} {
		g := &resetFixture{addr: f.addr, appID: bad}
		if _, err := g.reset(t, "--state-dir", f.stateRoot); err == nil || !strings.Contains(err.Error(), "not a directory name") {
			t.Errorf("reset --app-id %q: %v, want a refusal", bad, err)
		}
	}
	if _, err := os.Stat(f.stateRoot); err != nil {
		t.Fatalf("the state root is gone: %v", err)
	}
}
