package main

import (
	"net"
	"os"
	"strings"
	"testing"
)

// TestQueryConfigApplicationServer: application.server comes from the flag,
// the environment or the file, and must be host:port.
func TestQueryConfigApplicationServer(t *testing.T) {
	clearEnv(t)
	if cfg, err := loadVia(t, "x"); err != nil || cfg.AppServer != "" {
		t.Errorf("default: %q %v, want unset", cfg.AppServer, err)
	}
	if cfg, err := loadVia(t, "x", "--advertised-endpoint", "host-a:9100"); err != nil || cfg.AppServer != "host-a:9100" {
		t.Errorf("flag: %q %v", cfg.AppServer, err)
	}
	t.Setenv("SLUICE_APPLICATION_SERVER", "host-b:9100")
	if cfg, err := loadVia(t, "x"); err != nil || cfg.AppServer != "host-b:9100" {
		t.Errorf("environment: %q %v", cfg.AppServer, err)
	}
	t.Setenv("SLUICE_APPLICATION_SERVER", "")
	if cfg, err := loadVia(t, "x", "--config", writeConfig(t, "application.server: host-c:9100\n")); err != nil || cfg.AppServer != "host-c:9100" {
		t.Errorf("file: %q %v", cfg.AppServer, err)
	}
	if _, err := loadVia(t, "x", "--advertised-endpoint", "no-port"); err == nil || !strings.Contains(err.Error(), "application.server") {
		t.Errorf("invalid endpoint accepted: %v", err)
	}
}

type fakeListener struct {
	net.Listener
	addr string
}

func (f fakeListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP(strings.Split(f.addr, ":")[0]), Port: 9100}
}

// TestQueryAdvertisable: the default advertised endpoint of run --http is
// the bound address, with the host name for a wildcard host.
func TestQueryAdvertisable(t *testing.T) {
	if got := advertisable(fakeListener{addr: "127.0.0.1:9100"}); got != "127.0.0.1:9100" {
		t.Errorf("loopback: %q", got)
	}
	host, _ := os.Hostname()
	if got := advertisable(fakeListener{addr: "0.0.0.0:9100"}); got != net.JoinHostPort(host, "9100") {
		t.Errorf("wildcard: %q, want %s:9100", got, host)
	}
}
