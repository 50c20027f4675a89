package testbroker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestExternal(t *testing.T) {
	for _, c := range []struct {
		env  string
		want []string
	}{
		{"", nil},
		{" , ", nil},
		{"k1:9092", []string{"k1:9092"}},
		{" k1:9092, k2:9092 ,,", []string{"k1:9092", "k2:9092"}},
	} {
		t.Setenv(Env, c.env)
		if got := External(); !slices.Equal(got, c.want) {
			t.Errorf("%s=%q: %v, want %v", Env, c.env, got, c.want)
		}
	}
}

// TestAddrsAnswers: the cluster Addrs gives answers metadata requests;
// without Env, it is an in-process broker.
func TestAddrsAnswers(t *testing.T) {
	addrs := Addrs(t)
	if len(External()) == 0 && (len(addrs) != 1 || !strings.HasPrefix(addrs[0], "127.0.0.1:")) {
		t.Fatalf("in-process broker at %v, want one on loopback", addrs)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).BrokerMetadata(ctx); err != nil {
		t.Fatalf("metadata: %v", err)
	}
}

func TestUnique(t *testing.T) {
	a, b := Unique(t, "x-"), Unique(t, "x-")
	if a == b || !strings.HasPrefix(a, "x-") || len(a) != len("x-")+8 {
		t.Fatalf("Unique: %q, %q", a, b)
	}
}
