package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestBrokerCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	out, w := io.Pipe()
	root := newRootCmd()
	root.SetArgs([]string{"broker", "--listen", "127.0.0.1:0", "--partitions", "2", "--topics", "in.put_A-1:3,out"})
	root.SetOut(w)
	root.SetErr(io.Discard)
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(runCtx)
		w.Close()
		done <- err
	}()

	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen line: %v", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "sluice broker listening on 127.0.0.1:")
	if !ok || addr == "" || addr == "0" {
		t.Fatalf("first line %q, want %q", line, "sluice broker listening on 127.0.0.1:PORT")
	}
	addr = "127.0.0.1:" + addr
	go io.Copy(io.Discard, out) //nolint:errcheck // drain until the command closes w

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
	// --topics: created at start, with their partitions or --partitions.
	td, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"in.put_A-1": 3, "out": 2} {
		if got := len(td[name].Partitions); !td.Has(name) || got != want {
			t.Errorf("topic %s: exists %v, %d partitions; want %d", name, td.Has(name), got, want)
		}
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("broker command returned %v, want nil after cancel", err)
		}
	case <-ctx.Done():
		t.Fatal("broker command did not return after cancel")
	}
}

func TestBrokerCommandBadListen(t *testing.T) {
	root := newRootCmd()
	root.SetArgs([]string{"broker", "--listen", "not-an-address"})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.ExecuteContext(t.Context())
	if err == nil || !strings.HasPrefix(err.Error(), "broker: ") {
		t.Fatalf("err = %v, want a broker: error", err)
	}
}

func TestSubcommandsRegistered(t *testing.T) {
	root := newRootCmd()
	if c, _, err := root.Find([]string{"broker"}); err != nil || c.Name() != "broker" {
		t.Fatalf("broker not registered: %v", err)
	}
	// A second tree must not share flag state with the first.
	a, b := newRootCmd(), newRootCmd()
	fa, _, _ := a.Find([]string{"broker"})
	fb, _, _ := b.Find([]string{"broker"})
	if fa.Flags().Lookup("listen") == fb.Flags().Lookup("listen") {
		t.Fatal("two root commands share the broker's flags")
	}
}

func TestParseTopicSpecs(t *testing.T) {
	got, err := parseTopicSpecs([]string{"a:4", " b ", "c.d_E-1:1"})
	if err != nil || len(got) != 3 || got["a"] != 4 || got["b"] != 0 || got["c.d_E-1"] != 1 {
		t.Errorf("parseTopicSpecs: %v, %v", got, err)
	}
	for _, bad := range [][]string{{":3"}, {"a:0"}, {"a:-1"}, {"a:x"}, {"a:"}, {"a", "a:2"}, {"a:99999999999"}} {
		if _, err := parseTopicSpecs(bad); err == nil {
			t.Errorf("parseTopicSpecs(%q): no error", bad)
		}
	}
}
