package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/processor"
)

// testPassword must never appear in an error, a printed configuration or a
// formatted appConfig.
const testPassword = "hunter2-not-for-logs"

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func testCerts(t *testing.T) broker.Certs {
	t.Helper()
	c, err := broker.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noLeak fails when the password shows in any rendering of cfg.
func noLeak(t *testing.T, cfg appConfig) {
	t.Helper()
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	slog.New(slog.NewJSONHandler(&log, nil)).Info("cfg", "cfg", cfg, "security", cfg.Security, "password", cfg.Security.Password)
	slog.New(slog.NewTextHandler(&log, nil)).Info("cfg", "cfg", cfg, "password", cfg.Security.Password)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s %q %x", cfg, cfg, cfg, cfg.Security.Password, cfg.Security.Password, cfg.Security.Password), string(j), log.String()} {
		if strings.Contains(s, testPassword) || strings.Contains(s, fmt.Sprintf("%x", testPassword)) {
			t.Fatalf("the password leaks: %s", s)
		}
	}
}

func TestSecurityKeys(t *testing.T) {
	certs := testCerts(t)
	pwFile := writeFile(t, "pw", testPassword+"\n")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		yaml string
		want security // opts not compared
	}{
		{
			name: "flags",
			args: []string{"--security-protocol", "SASL_SSL", "--sasl-mechanism", "scram-sha-512", "--sasl-username", "u",
				"--sasl-password-file", pwFile, "--ssl-ca", certs.CA, "--ssl-cert", certs.ClientCert, "--ssl-key", certs.ClientKey},
			want: security{Protocol: "sasl_ssl", Mechanism: "SCRAM-SHA-512", Username: "u", Password: testPassword,
				PasswordFile: pwFile, CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey},
		},
		{
			name: "environment",
			env: map[string]string{"SLUICE_SECURITY_PROTOCOL": "sasl_plaintext", "SLUICE_SASL_MECHANISM": "PLAIN",
				"SLUICE_SASL_USERNAME": "u", "SLUICE_SASL_PASSWORD": testPassword},
			want: security{Protocol: "sasl_plaintext", Mechanism: "PLAIN", Username: "u", Password: testPassword},
		},
		{
			name: "environment password file",
			env: map[string]string{"SLUICE_SECURITY_PROTOCOL": "sasl_plaintext", "SLUICE_SASL_MECHANISM": "PLAIN",
				"SLUICE_SASL_USERNAME": "u", "SLUICE_SASL_PASSWORD_FILE": pwFile},
			want: security{Protocol: "sasl_plaintext", Mechanism: "PLAIN", Username: "u", Password: testPassword, PasswordFile: pwFile},
		},
		{
			name: "flat file",
			yaml: fmt.Sprintf("security.protocol: SSL\nssl.ca.location: %s\n", certs.CA),
			want: security{Protocol: "ssl", CA: certs.CA},
		},
		{
			name: "flat file with password",
			yaml: fmt.Sprintf("security.protocol: sasl_ssl\nsasl.mechanism: SCRAM-SHA-256\nsasl.username: u\nsasl.password: %q\n", testPassword),
			want: security{Protocol: "sasl_ssl", Mechanism: "SCRAM-SHA-256", Username: "u", Password: testPassword},
		},
		{
			name: "flat file with password file",
			yaml: fmt.Sprintf("security.protocol: sasl_ssl\nsasl.mechanism: SCRAM-SHA-256\nsasl.username: u\nsasl.password.file: %s\n", pwFile),
			want: security{Protocol: "sasl_ssl", Mechanism: "SCRAM-SHA-256", Username: "u", Password: testPassword, PasswordFile: pwFile},
		},
		{
			name: "nested file",
			yaml: fmt.Sprintf("security:\n  protocol: sasl_plaintext\nsasl:\n  mechanism: PLAIN\n  username: u\n  password:\n    file: %s\n", pwFile),
			want: security{Protocol: "sasl_plaintext", Mechanism: "PLAIN", Username: "u", Password: testPassword, PasswordFile: pwFile},
		},
		{
			name: "default",
			want: security{Protocol: "plaintext"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := caseArgs(t, tc.env, tc.args, tc.yaml)
			got, err := loadVia(t, "app", args...)
			if err != nil {
				t.Fatal(err)
			}
			s := got.Security
			s.opts = nil
			if fmt.Sprint(s.Password.reveal()) != tc.want.Password.reveal() || !reflect.DeepEqual(s, tc.want) {
				t.Fatalf("got  %#v\nwant %#v (passwords equal: %v)", s, tc.want, s.Password == tc.want.Password)
			}
			wantOpts := 0
			if s.tls() {
				wantOpts++
			}
			if s.sasl() {
				wantOpts++
			}
			if n := len(got.Security.opts); n != wantOpts {
				t.Errorf("%d client options, want %d", n, wantOpts)
			}
			if n := len(got.clientOpts()); n != 1+wantOpts {
				t.Errorf("clientOpts() has %d options, want %d", n, 1+wantOpts)
			}
			noLeak(t, got)
		})
	}
}

func TestSecurityRejects(t *testing.T) {
	certs := testCerts(t)
	pwFile := writeFile(t, "pw", testPassword)
	saslEnv := map[string]string{"SLUICE_SECURITY_PROTOCOL": "sasl_ssl", "SLUICE_SASL_MECHANISM": "PLAIN", "SLUICE_SASL_USERNAME": "u"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		yaml string
		args []string
		want []string
	}{
		{name: "unknown protocol", args: []string{"--security-protocol", "tls"},
			want: []string{"security.protocol", `"tls"`, "--security-protocol"}},
		{name: "sasl without mechanism", args: []string{"--security-protocol", "sasl_plaintext", "--sasl-username", "u"},
			env:  map[string]string{"SLUICE_SASL_PASSWORD": testPassword},
			want: []string{"sasl.mechanism is required with security.protocol sasl_plaintext", "--sasl-mechanism"}},
		{name: "sasl without username", env: with(saslEnv, "SLUICE_SASL_USERNAME", "", "SLUICE_SASL_PASSWORD", testPassword),
			want: []string{"sasl.username is required"}},
		{name: "sasl without password", env: saslEnv,
			want: []string{"sasl.password or sasl.password.file is required", "SLUICE_SASL_PASSWORD"}},
		{name: "unknown mechanism", env: with(saslEnv, "SLUICE_SASL_MECHANISM", "GSSAPI", "SLUICE_SASL_PASSWORD", testPassword),
			want: []string{"sasl.mechanism", `"GSSAPI"`, "SCRAM-SHA-512"}},
		{name: "password twice", env: with(saslEnv, "SLUICE_SASL_PASSWORD", testPassword), args: []string{"--sasl-password-file", pwFile},
			want: []string{"sasl.password (from environment SLUICE_SASL_PASSWORD) and sasl.password.file (from flag --sasl-password-file) are both set"}},
		{name: "password in environment and file in config file", env: with(saslEnv, "SLUICE_SASL_PASSWORD", testPassword),
			yaml: "sasl.password.file: " + pwFile + "\n",
			want: []string{"sasl.password (from environment SLUICE_SASL_PASSWORD) and sasl.password.file (from config file"}},
		{name: "password twice in the file",
			yaml: fmt.Sprintf("security.protocol: sasl_ssl\nsasl.mechanism: PLAIN\nsasl.username: u\nsasl.password: %s\nsasl.password.file: %s\n", testPassword, pwFile),
			want: []string{"sasl.password (from config file", "sasl.password.file (from config file", "both set"}},
		{name: "password file missing", env: with(saslEnv, "SLUICE_SASL_PASSWORD_FILE", "/nonexistent/pw"),
			want: []string{"sasl.password.file", "/nonexistent/pw", "SLUICE_SASL_PASSWORD_FILE"}},
		{name: "password file empty", env: with(saslEnv, "SLUICE_SASL_PASSWORD_FILE", writeFile(t, "empty", "\n")),
			want: []string{"sasl.password.file", "empty"}},
		{name: "password as a list", yaml: fmt.Sprintf("security.protocol: sasl_ssl\nsasl.mechanism: PLAIN\nsasl.username: u\nsasl.password: [%s]\n", testPassword),
			want: []string{"sasl.password", "single value"}},
		{name: "sasl key with plaintext", args: []string{"--sasl-username", "u"},
			want: []string{"sasl.username is set (from flag --sasl-username) but security.protocol is plaintext (from default)", "sasl_plaintext or sasl_ssl"}},
		{name: "password with ssl", env: map[string]string{"SLUICE_SECURITY_PROTOCOL": "ssl", "SLUICE_SASL_PASSWORD": testPassword},
			want: []string{"sasl.password is set (from environment SLUICE_SASL_PASSWORD) but security.protocol is ssl"}},
		{name: "ssl key with plaintext", yaml: "ssl.ca.location: " + certs.CA + "\n",
			want: []string{"ssl.ca.location is set (from config file", "security.protocol is plaintext", "ssl or sasl_ssl"}},
		{name: "ssl key with sasl_plaintext", env: with(saslEnv, "SLUICE_SECURITY_PROTOCOL", "sasl_plaintext", "SLUICE_SASL_PASSWORD", testPassword, "SLUICE_SSL_CA_LOCATION", certs.CA),
			want: []string{"ssl.ca.location is set (from environment SLUICE_SSL_CA_LOCATION) but security.protocol is sasl_plaintext"}},
		{name: "certificate without key", args: []string{"--security-protocol", "ssl", "--ssl-cert", certs.ClientCert},
			want: []string{"ssl.certificate.location is set (from flag --ssl-cert) but ssl.key.location is not", "--ssl-key"}},
		{name: "key without certificate", args: []string{"--security-protocol", "ssl", "--ssl-key", certs.ClientKey},
			want: []string{"ssl.key.location is set (from flag --ssl-key) but ssl.certificate.location is not"}},
		{name: "CA missing", args: []string{"--security-protocol", "ssl", "--ssl-ca", "/nonexistent/ca.pem"},
			want: []string{"ssl.ca.location", "/nonexistent/ca.pem", "--ssl-ca"}},
		{name: "CA not PEM", args: []string{"--security-protocol", "ssl", "--ssl-ca", pwFile},
			want: []string{"ssl.ca.location", "no PEM certificate"}},
		{name: "key of another certificate", args: []string{"--security-protocol", "ssl", "--ssl-cert", certs.ClientCert, "--ssl-key", certs.ServerKey},
			want: []string{"ssl.certificate.location", "ssl.key.location", certs.ServerKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := caseArgs(t, tc.env, tc.args, tc.yaml)
			_, err := loadVia(t, "app", args...)
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestConfigCommandMasksPassword(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"from environment", map[string]string{"SLUICE_SASL_PASSWORD": testPassword},
			[]string{`sasl.password: "********"  # from environment SLUICE_SASL_PASSWORD`}},
		{"from file", map[string]string{"SLUICE_SASL_PASSWORD_FILE": writeFile(t, "pw", testPassword)},
			[]string{`sasl.password: ""  # from default`, `sasl.password.file: "` + os.TempDir()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			root := newRootCmd()
			var out strings.Builder
			root.SetOut(&out)
			root.SetArgs([]string{"config", "--security-protocol", "sasl_plaintext", "--sasl-mechanism", "PLAIN", "--sasl-username", "alice"})
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			want := append([]string{
				`security.protocol: "sasl_plaintext"  # from flag --security-protocol`,
				`sasl.username: "alice"  # from flag --sasl-username`,
				`ssl.ca.location: ""  # from default`,
			}, tc.want...)
			for _, w := range want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), testPassword) {
				t.Errorf("output shows the password:\n%s", out.String())
			}
		})
	}
}

// TestSecureConfigAgainstBroker connects through the configuration keys to
// an embedded broker that wants SASL over mutual TLS: the admin options
// (clientOpts) and the processor's (opts) both get through, and a wrong
// password configured the same way is refused.
func TestSecureConfigAgainstBroker(t *testing.T) {
	b, certs := startSecureBroker(t)
	load := func(t *testing.T, password string) appConfig {
		t.Helper()
		clearEnv(t)
		t.Setenv("SLUICE_SASL_PASSWORD", password)
		cfg, err := loadVia(t, "secure", "--brokers", strings.Join(b.Addrs(), ","), "--state-dir", t.TempDir(),
			"--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "alice",
			"--ssl-ca", certs.CA, "--ssl-cert", certs.ClientCert, "--ssl-key", certs.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	listTopics := func(t *testing.T, cfg appConfig) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(cfg.clientOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = kadm.NewClient(cl).ListTopics(ctx)
		if ctx.Err() != nil {
			t.Fatalf("still trying after 20s: %v", err)
		}
		return err
	}
	runApp := func(t *testing.T, cfg appConfig) error {
		t.Helper()
		app, err := processor.New(examples.WordCount("lines", "counts", "lines-dlq"), cfg.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		for app.Stats().Processed.Load() == 0 {
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
				t.Fatal("nothing processed in 30s")
			case <-time.After(20 * time.Millisecond):
			}
		}
		cancel()
		return <-done
	}

	good := load(t, testPassword)
	if err := listTopics(t, good); err != nil {
		t.Fatalf("clientOpts: %v", err)
	}
	for _, topic := range []string{"lines", "counts"} {
		if err := broker.CreateTopic(t.Context(), b.Addrs(), topic, 1, nil, good.Security.opts...); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(append(good.clientOpts(), kgo.DefaultProduceTopic("lines"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte("a secure line")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := runApp(t, good); err != nil {
		t.Fatalf("processor with opts(): %v", err)
	}

	bad := load(t, "wrong-"+testPassword)
	err = listTopics(t, bad)
	if err == nil {
		t.Fatal("wrong password accepted by clientOpts")
	}
	if err := runApp(t, bad); err == nil || strings.Contains(err.Error(), testPassword) {
		t.Fatalf("processor with a wrong password: %v, want a refusal without the password", err)
	}
}

// TestSecureBrokerCommand starts `sluice broker` with a SASL user and mutual
// TLS, and connects to it through the configuration keys and the files the
// command wrote.
func TestSecureBrokerCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	dir := t.TempDir()
	out, w := io.Pipe()
	var stderr strings.Builder
	root := newRootCmd()
	root.SetArgs([]string{"broker", "--listen", "127.0.0.1:0", "--sasl-user", "scram-sha-512:bob:" + testPassword,
		"--tls-dir", dir, "--tls-client-auth"})
	root.SetOut(w)
	root.SetErr(&stderr)
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(runCtx)
		w.Close()
		done <- err
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen line: %v (stderr %s)", err, stderr.String())
	}
	addr := strings.TrimPrefix(strings.TrimSpace(line), "sluice broker listening on ")
	go io.Copy(io.Discard, out) //nolint:errcheck // drain until the command closes w

	ping := func(t *testing.T, password string, args ...string) error {
		t.Helper()
		clearEnv(t)
		t.Setenv("SLUICE_SASL_PASSWORD", password)
		cfg, err := loadVia(t, "app", append([]string{"--brokers", addr, "--security-protocol", "sasl_ssl",
			"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "bob"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(append(cfg.clientOpts(), kgo.RequestRetries(2))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
		defer pcancel()
		err = cl.Ping(pctx)
		if pctx.Err() != nil {
			t.Fatalf("ping still trying after 15s: %v", err)
		}
		return err
	}
	files := []string{"--ssl-ca", filepath.Join(dir, "ca.pem"), "--ssl-cert", filepath.Join(dir, "client.pem"), "--ssl-key", filepath.Join(dir, "client-key.pem")}
	if err := ping(t, testPassword, files...); err != nil {
		t.Fatalf("ping with the right password and certificate: %v", err)
	}
	if err := ping(t, "wrong", files...); err == nil {
		t.Error("wrong password accepted")
	}
	if err := ping(t, testPassword, files[:2]...); err == nil {
		t.Error("accepted without a client certificate")
	}
	if !strings.Contains(stderr.String(), "ssl.ca.location="+filepath.Join(dir, "ca.pem")) {
		t.Errorf("stderr does not name the CA file: %s", stderr.String())
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("broker command returned %v", err)
		}
	case <-ctx.Done():
		t.Fatal("broker command did not return after cancel")
	}
}

func TestSecureBrokerCommandRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--sasl-user", "PLAIN:" + testPassword},
		{"--sasl-user", "GSSAPI:u:" + testPassword},
		{"--tls-client-auth"},
	} {
		root := newRootCmd()
		root.SetArgs(append([]string{"broker", "--listen", "127.0.0.1:0"}, args...))
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		err := root.ExecuteContext(t.Context())
		if err == nil || !strings.HasPrefix(err.Error(), "broker: ") || strings.Contains(err.Error(), testPassword) {
			t.Errorf("%v: err = %v, want a broker: error without the password", args, err)
		}
	}
}
