package names

import (
	"fmt"
	"strings"
	"testing"
)

// adversarial app ids and user names: empty, with '-', ending in the
// suffixes themselves, or equal to them.
var (
	appIDs    = []string{"", "a", "app", "my-app", "a-b", "x-changelog", "x-repartition", "-", "app-dlq", "changelog", "-changelog"}
	userNames = []string{"", "s", "counts", "by-user", "c-changelog", "r-repartition", "t-time", "dlq", "-", "-changelog", "-repartition", "changelog", "repartition"}
)

// TestNamesAreTheContract pins every name to its documented shape, byte for
// byte: these are the topics existing applications already have.
func TestNamesAreTheContract(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Changelog("app", "counts"), "app-counts-changelog"},
		{Internal("app", Repartition("by-user")), "app-by-user-repartition"},
		{DeadLetter("app"), "app-dlq"},
		{TimeStore(Repartition("by-user")), "by-user-repartition-time"},
		{Changelog("app", TimeStore(Repartition("by-user"))), "app-by-user-repartition-time-changelog"},
		{Changelog("my-app", "c-changelog"), "my-app-c-changelog-changelog"},
		{Internal("my-app", Repartition("r-repartition")), "my-app-r-repartition-repartition"},
		{Changelog("", ""), "--changelog"},
		{Internal("", Repartition("")), "--repartition"},
		{DeadLetter(""), "-dlq"},
		{TimeStore(""), "-time"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestIsInternalRecognisesEveryInternalName: every name the package builds
// for an application is internal to it, whatever the app id and user name.
func TestIsInternalRecognisesEveryInternalName(t *testing.T) {
	for _, app := range appIDs {
		for _, n := range userNames {
			for _, topic := range []string{
				Changelog(app, n),
				Internal(app, Repartition(n)),
				Changelog(app, TimeStore(Repartition(n))),
			} {
				if !IsInternal(app, topic) {
					t.Errorf("IsInternal(%q, %q) = false for a topic built for it", app, topic)
				}
			}
		}
	}
}

// TestIsInternalRejectsWhatIsNotTheApps: the dead-letter topic, user
// topics, and internal topics of applications whose id is not a '-'
// extension of app are not internal to app.
func TestIsInternalRejectsWhatIsNotTheApps(t *testing.T) {
	for _, app := range appIDs {
		not := []string{
			DeadLetter(app),
			app,
			app + "-",
			app + "-counts",
			app + "changelog",
			app + "-counts-changelog-out",
			app + "-by-user-repartition-time", // the time store's name, not its changelog
			app + "x-counts-changelog",        // application appx, not app
			"x" + app + "-counts-changelog",
			"other-counts-changelog",
		}
		for _, n := range userNames {
			// User topics that merely contain the suffixes.
			not = append(not, app+"-"+n+"-changelog-out", app+"-"+n+"-repartition.v2")
			if u := n + "-changelog"; !strings.HasPrefix(u, app+"-") {
				not = append(not, u) // without the application's prefix
			}
		}
		for _, topic := range not {
			if app == "" && topic == "other-counts-changelog" {
				continue // see TestIsInternalIsAPrefixRule
			}
			if IsInternal(app, topic) {
				t.Errorf("IsInternal(%q, %q) = true for a topic that is not the application's", app, topic)
			}
		}
	}
}

// TestIsInternalIsAPrefixRule pins the rule's known ambiguity, which it
// shares with Kafka Streams' reset tool: the names are concatenations, so
// application "a" claims application "a-b"'s internal topics. A change to
// the rule must be deliberate.
func TestIsInternalIsAPrefixRule(t *testing.T) {
	for _, c := range []struct {
		app, topic string
		want       bool
	}{
		{"a", Changelog("a-b", "c"), true},
		{"a-b", Changelog("a", "b-c"), true}, // the same topic
		{"a-b", Changelog("a", "c"), false},
		{"", "-counts-changelog", true},
		{"", "other-counts-changelog", false},
	} {
		if got := IsInternal(c.app, c.topic); got != c.want {
			t.Errorf("IsInternal(%q, %q) = %t, want %t", c.app, c.topic, got, c.want)
		}
	}
}

func ExampleChangelog() {
	fmt.Println(Changelog("wordcount", "counts"))
	fmt.Println(Internal("billing", Repartition("bills-by-account")))
	fmt.Println(DeadLetter("billing"))
	// Output:
	// wordcount-counts-changelog
	// billing-bills-by-account-repartition
	// billing-dlq
}
