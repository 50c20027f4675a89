package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/processor"
)

// TestDefaultsAreTheProcessors: every default the command shows and uses is
// processor's, also where the environment moves it (TMPDIR moves state.dir:
// the command used os.TempDir(), processor /tmp/sluice).
func TestDefaultsAreTheProcessors(t *testing.T) {
	clearEnv(t)
	t.Setenv("TMPDIR", t.TempDir())
	got, err := loadVia(t, "wordcount")
	if err != nil {
		t.Fatal(err)
	}
	d := processor.Defaults()
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{keyBrokers, got.Brokers, d.BootstrapServers},
		{keyGuarantee, got.Guarantee, d.ProcessingGuarantee},
		{keyCommitInterval, got.CommitInterval, d.CommitInterval},
		{keyStateDir, got.StateDir, d.StateDir},
		{keySessionTimeout, got.SessionTimeout, d.SessionTimeout},
		{keyStandbyReplicas, got.StandbyReplicas, d.NumStandbyReplicas},
		{keyAcceptableLag, int64(got.AcceptableLag), d.AcceptableRecoveryLag},
		{keyMaxWarmups, got.MaxWarmups, d.MaxWarmupReplicas},
		{keyProbeInterval, got.ProbeInterval, d.ProbingRebalanceInterval},
		{keyStreamThreads, got.StreamThreads, d.NumStreamThreads},
		{keyFoldUpdates, got.FoldUpdates, d.FoldUpdates},
		{keyMaxRecordBytes, got.MaxRecordBytes, d.MaxRecordBytes},
		{keyIdleTimeout, got.IdleTimeout, d.IdleTimeout},
		{keyMemoryBudget, got.MemoryBudget, d.StateMemoryBudget},
		{keyMemoryGoLimit, got.MemoryGoLimit, d.StateMemoryGoLimit},
		{keyPartFetchBytes, got.PartFetchBytes, int64(d.MaxPartitionFetchBytes)},
	} {
		if !equalAny(c.got, c.want) {
			t.Errorf("%s: the command's default %v, processor's %v", c.key, c.got, c.want)
		}
	}
}

func equalAny(a, b any) bool {
	if as, ok := a.([]string); ok {
		bs, ok := b.([]string)
		return ok && slices.Equal(as, bs)
	}
	return a == b
}

// TestOnlySetKeysArePassed: the command hands processor the keys given by
// flag, environment or file, each once, and leaves the others to its
// defaults.
func TestOnlySetKeysArePassed(t *testing.T) {
	args := caseArgs(t, map[string]string{"SLUICE_COMMIT_INTERVAL": "1s"},
		[]string{"--brokers", "b:1", "--state-dir", t.TempDir()}, "fold.updates: true\n")
	got, err := loadVia(t, "wordcount", args...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{keyBrokers, keyCommitInterval, keyStateDir, keyFoldUpdates}
	if keys := got.setKeys(); !slices.Equal(keys, want) {
		t.Errorf("set keys %v, want %v", keys, want)
	}
	// The application id and the security options, then one per key.
	if n := len(got.opts()); n != 2+len(want) {
		t.Errorf("%d options, want %d", n, 2+len(want))
	}
	for _, k := range appKeys {
		if got.opt(k.key) == nil && !slices.Contains([]string{keyAppID, keyHTTPAddress, keyLogLevel, keyLogFormat}, k.key) && !isSecurityKey(k.key) && !isDBKey(k.key) {
			t.Errorf("key %s has no processor option", k.key)
		}
	}
	clearEnv(t)
	none, err := loadVia(t, "wordcount")
	if err != nil {
		t.Fatal(err)
	}
	if keys := none.setKeys(); len(keys) != 0 {
		t.Errorf("set keys %v with nothing set", keys)
	}
}

// isSecurityKey: the Kafka connection's security keys, and the HTTP
// server's (http.tls.*, http.client.ca, http.token*).
func isSecurityKey(k string) bool {
	return strings.HasPrefix(k, "security.") || strings.HasPrefix(k, "sasl.") || strings.HasPrefix(k, "ssl.") ||
		strings.HasPrefix(k, "http.") && k != keyHTTPAddress
}
