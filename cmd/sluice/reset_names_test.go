package main

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/names"
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
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx := testCtx(t)
	for _, tp := range append(slices.Clone(internal), untouched...) {
		if err := broker.CreateTopic(ctx, b.Addrs(), tp, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	f := &resetFixture{addr: b.Addrs()[0], appID: app}
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
