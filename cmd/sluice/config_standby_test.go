package main

import (
	"strings"
	"testing"
	"time"
)

// The standby, warm-up and session keys load from a flag, the environment
// and the config file like every other key, and are checked.
func TestStandbyKeys(t *testing.T) {
	clearEnv(t)
	got, err := loadVia(t, "wc")
	if err != nil {
		t.Fatal(err)
	}
	if got.StandbyReplicas != 0 || got.AcceptableLag != 10_000 || got.MaxWarmups != 2 ||
		got.ProbeInterval != 10*time.Minute || got.SessionTimeout != 10*time.Second {
		t.Errorf("defaults: %+v", got)
	}
	path := writeConfig(t, "num.standby.replicas: 1\nmax.warmup.replicas: 3\n")
	t.Setenv("SLUICE_ACCEPTABLE_RECOVERY_LAG", "500")
	got, err = loadVia(t, "wc", "--config", path, "--probing-rebalance-interval", "5s", "--session-timeout", "30s")
	if err != nil {
		t.Fatal(err)
	}
	if got.StandbyReplicas != 1 || got.MaxWarmups != 3 || got.AcceptableLag != 500 ||
		got.ProbeInterval != 5*time.Second || got.SessionTimeout != 30*time.Second {
		t.Errorf("file, env and flags: %+v", got)
	}
	if got.sources[keyAcceptableLag] != "environment SLUICE_ACCEPTABLE_RECOVERY_LAG" {
		t.Errorf("source of %s: %q", keyAcceptableLag, got.sources[keyAcceptableLag])
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-warmup-replicas", "0"}, "max.warmup.replicas is required"},
		{[]string{"--acceptable-recovery-lag", "-1"}, "acceptable.recovery.lag"},
		{[]string{"--probing-rebalance-interval", "10ms"}, "probing.rebalance.interval"},
		{[]string{"--session-timeout", "0s"}, "session.timeout"},
	} {
		clearEnv(t)
		if _, err := loadVia(t, "wc", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one naming %q", c.args, err, c.want)
		}
	}
}
