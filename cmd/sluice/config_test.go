package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/txn"
)

// loadVia runs loadAppConfig inside a real command tree, so that --config is
// inherited from the root exactly as for `sluice run`.
func loadVia(t *testing.T, defaultAppID string, args ...string) (appConfig, error) {
	t.Helper()
	var (
		cfg    appConfig
		loadEr error
	)
	probe := &cobra.Command{
		Use: "probe",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, loadEr = loadAppConfig(cmd, defaultAppID)
			return nil
		},
	}
	addAppFlags(probe)
	root := newRootCmd()
	root.AddCommand(probe)
	root.SetArgs(append([]string{"probe"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	if err := root.Execute(); err != nil {
		t.Fatalf("execute: %v", err)
	}
	return cfg, loadEr
}

// clearEnv hides any SLUICE_ variable of the developer's shell; viper treats
// an empty variable as unset.
func clearEnv(t *testing.T) {
	for _, k := range appKeys {
		t.Setenv(envName(k.key), "")
	}
}

// caseArgs sets a table case's environment on a cleared one and returns its
// arguments, with --config for its YAML, if any.
func caseArgs(t *testing.T, env map[string]string, args []string, yaml string) []string {
	t.Helper()
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	if yaml != "" {
		args = append(args[:len(args):len(args)], "--config", writeConfig(t, yaml))
	}
	return args
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	clearEnv(t)
	got, err := loadVia(t, "wordcount")
	if err != nil {
		t.Fatal(err)
	}
	want := appConfig{
		AppID:          "wordcount",
		Brokers:        []string{"127.0.0.1:9092"},
		Guarantee:      txn.ExactlyOnce,
		CommitInterval: 100 * time.Millisecond,
		StateDir:       filepath.Join(os.TempDir(), "sluice"),
	}
	if !equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if n := len(got.opts()); n == 0 {
		t.Fatal("opts() is empty")
	}
}

func TestPrecedence(t *testing.T) {
	clearEnv(t)
	// Each key is set down to a different layer, so one load shows the
	// whole order: flag > environment > config file > default.
	file := writeConfig(t, `
application.id: from-file
processing.guarantee: at_most_once
commit.interval: 3s
state.dir: /from/file
num.standby.replicas: 2
`)
	t.Setenv("SLUICE_APPLICATION_ID", "from-env")
	t.Setenv("SLUICE_PROCESSING_GUARANTEE", "at_least_once")
	t.Setenv("SLUICE_COMMIT_INTERVAL", "2s")

	got, err := loadVia(t, "from-default", "--config", file,
		"--app-id", "from-flag",
		"--instance-id", "i-1",
	)
	if err != nil {
		t.Fatal(err)
	}
	want := appConfig{
		AppID:           "from-flag",                // flag > env > file
		Guarantee:       txn.AtLeastOnce,            // env > file
		CommitInterval:  2 * time.Second,            // env > file
		StateDir:        "/from/file",               // file > default
		StandbyReplicas: 2,                          // file > default
		Brokers:         []string{"127.0.0.1:9092"}, // default
		InstanceID:      "i-1",
	}
	if !equal(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestBrokerLists(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, env string
		args            []string
	}{
		{name: "flag", args: []string{"--brokers", "a:1, b:2"}},
		{name: "env", env: "a:1,b:2"},
		{name: "yaml list", yaml: "bootstrap.servers: [a:1, b:2]"},
		{name: "yaml string", yaml: "bootstrap.servers: a:1,b:2"},
		{name: "nested yaml", yaml: "bootstrap:\n  servers:\n    - a:1\n    - b:2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("SLUICE_BOOTSTRAP_SERVERS", tc.env)
			args := tc.args
			if tc.yaml != "" {
				args = append(args, "--config", writeConfig(t, tc.yaml))
			}
			got, err := loadVia(t, "app", args...)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"a:1", "b:2"}; !slices.Equal(got.Brokers, want) {
				t.Fatalf("Brokers = %q, want %q", got.Brokers, want)
			}
		})
	}
}

func TestNestedYAML(t *testing.T) {
	clearEnv(t)
	file := writeConfig(t, "application:\n  id: nested\nstate:\n  dir: /nested\n")
	got, err := loadVia(t, "app", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if got.AppID != "nested" || got.StateDir != "/nested" {
		t.Fatalf("got %+v, want application.id and state.dir from the nested file", got)
	}
}

func TestRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		env  map[string]string
		args []string
		want []string // substrings of the error
	}{
		{
			name: "unknown key",
			yaml: "application.id: x\napplication.idd: y\n",
			want: []string{`unknown key "application.idd"`},
		},
		{
			name: "unknown nested key",
			yaml: "state:\n  dri: /x\n",
			want: []string{`unknown key "state.dri"`},
		},
		{
			name: "guarantee from file",
			yaml: "processing.guarantee: exactly_twice\n",
			want: []string{"processing.guarantee", "exactly_twice", "config file"},
		},
		{
			name: "guarantee from env",
			env:  map[string]string{"SLUICE_PROCESSING_GUARANTEE": "maybe"},
			want: []string{"processing.guarantee", `"maybe"`, "SLUICE_PROCESSING_GUARANTEE"},
		},
		{
			name: "guarantee from flag",
			args: []string{"--guarantee", "never"},
			want: []string{"processing.guarantee", `"never"`, "--guarantee"},
		},
		{
			name: "bare number as interval",
			yaml: "commit.interval: 100\n",
			want: []string{"commit.interval", "Go duration"},
		},
		{
			name: "non-positive interval",
			env:  map[string]string{"SLUICE_COMMIT_INTERVAL": "0s"},
			want: []string{"commit.interval", "positive"},
		},
		{
			name: "standby not a number",
			env:  map[string]string{"SLUICE_NUM_STANDBY_REPLICAS": "two"},
			want: []string{"num.standby.replicas", "integer"},
		},
		{
			name: "negative standby",
			args: []string{"--standby-replicas", "-1"},
			want: []string{"num.standby.replicas", "negative"},
		},
		{
			name: "empty brokers",
			args: []string{"--brokers", " , "},
			want: []string{"bootstrap.servers is required"},
		},
		{
			name: "log level",
			env:  map[string]string{"SLUICE_LOG_LEVEL": "loud"},
			want: []string{"log.level", `"loud"`, "SLUICE_LOG_LEVEL"},
		},
		{
			name: "log format",
			yaml: "log.format: xml\n",
			want: []string{"log.format", `"xml"`, "config file"},
		},
		{
			name: "no application id",
			want: []string{"application.id is required"},
		},
		{
			name: "list as application id",
			yaml: "application.id: [a, b]\n",
			want: []string{"application.id", "single value"},
		},
		{
			name: "several at once",
			yaml: "commit.interval: soon\nprocessing.guarantee: sometimes\n",
			want: []string{"commit.interval", "processing.guarantee"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := caseArgs(t, tc.env, tc.args, tc.yaml)
			defaultAppID := "app"
			if tc.name == "no application id" {
				defaultAppID = ""
			}
			_, err := loadVia(t, defaultAppID, args...)
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestMissingConfigFile(t *testing.T) {
	clearEnv(t)
	_, err := loadVia(t, "app", "--config", filepath.Join(t.TempDir(), "absent.yaml"))
	if err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Fatalf("err = %v, want one naming the missing file", err)
	}
}

func equal(a, b appConfig) bool {
	return a.AppID == b.AppID && slices.Equal(a.Brokers, b.Brokers) &&
		a.Guarantee == b.Guarantee && a.CommitInterval == b.CommitInterval &&
		a.StateDir == b.StateDir && a.StandbyReplicas == b.StandbyReplicas &&
		a.InstanceID == b.InstanceID
}

func TestConfigCommandPrintsSources(t *testing.T) {
	t.Setenv("SLUICE_STATE_DIR", "/var/lib/x")
	root := newRootCmd()
	var out strings.Builder
	root.SetOut(&out)
	root.SetArgs([]string{"config", "--app-id", "billing"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`application.id: "billing"  # from flag --app-id`,
		`state.dir: "/var/lib/x"  # from environment SLUICE_STATE_DIR`,
		`processing.guarantee: "exactly_once"  # from default`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if masked("sasl.password", "hunter2") == "hunter2" || masked("application.id", "x") != "x" {
		t.Error("masking is wrong")
	}
}

// TestLogFormat checks that log.format json gives JSON lines at log.level.
func TestLogFormat(t *testing.T) {
	clearEnv(t)
	t.Setenv("SLUICE_LOG_FORMAT", "json")
	t.Setenv("SLUICE_LOG_LEVEL", "warn")
	cfg, err := loadVia(t, "app")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := cfg.logger(&buf)
	log.Info("hidden")
	log.Warn("shown", "task", "0_1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "shown" || line["task"] != "0_1" {
		t.Fatalf("log output %q (%v), want one JSON line for the warning only", buf.String(), err)
	}
}
