package main

import (
	"strings"
	"testing"
)

// TestDBConfig: the database keys resolve like the others (flag over
// environment over config file), reject what they cannot mean, and `sluice
// config` shows the URL without its password.
func TestDBConfig(t *testing.T) {
	clearEnv(t)
	none, err := loadVia(t, "billing")
	if err != nil || none.DB != (dbConfig{Mode: "two_phase"}) {
		t.Fatalf("defaults: %+v, %v", none.DB, err)
	}
	yaml := "db.url: mysql://file@db:3306/x\ndb.mode: offsets\ndb.create.tables: true\ndb.password: fromfile\n"
	got, err := loadVia(t, "billing", caseArgs(t, nil, nil, yaml)...)
	if err != nil || got.DB != (dbConfig{URL: "mysql://file@db:3306/x", Password: "fromfile", Mode: "offsets", CreateTables: true}) {
		t.Errorf("config file: %+v, %v", got.DB, err)
	}
	env := map[string]string{"SLUICE_DB_URL": "postgres://env@db:5432/x", "SLUICE_DB_PASSWORD": "fromenv", "SLUICE_DB_MODE": "two_phase"}
	got, err = loadVia(t, "billing", caseArgs(t, env, nil, yaml)...)
	if err != nil || got.DB.URL != env["SLUICE_DB_URL"] || got.DB.Password != "fromenv" || got.DB.Mode != "two_phase" || !got.DB.CreateTables {
		t.Errorf("environment over file: %+v, %v", got.DB, err)
	}
	got, err = loadVia(t, "billing", caseArgs(t, env, []string{"--db", "postgres://flag@db:5432/x", "--db-mode", "offsets"}, "")...)
	if err != nil || got.DB.URL != "postgres://flag@db:5432/x" || got.DB.Mode != "offsets" || got.sources[keyDBURL] != "flag --db" {
		t.Errorf("flag over environment: %+v (%s), %v", got.DB, got.sources[keyDBURL], err)
	}
	for _, c := range []struct {
		args string
		env  map[string]string
		want string
	}{
		{"--db-mode fast", nil, "invalid db.mode"},
		{"--db-mode=two-phase", nil, "invalid db.mode"},
		{"", map[string]string{"SLUICE_DB_CREATE_TABLES": "maybe"}, "invalid db.create.tables \"maybe\" (from environment SLUICE_DB_CREATE_TABLES)"},
	} {
		_, err := loadVia(t, "billing", caseArgs(t, c.env, strings.Fields(c.args), "")...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want an error with %q", c.args, c.env, err, c.want)
		}
	}

	clearEnv(t)
	t.Setenv("SLUICE_DB_PASSWORD", "envpass")
	out, err := runSluice(t.Context(), "config", "--db", "postgres://bob:s3cret@db:5432/ledger")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "s3cret") || strings.Contains(out, "envpass") || !strings.Contains(out, `db.url: "postgres://bob@db:5432/ledger"`) ||
		!strings.Contains(out, `db.password: "********"`) {
		t.Errorf("sluice config shows:\n%s", out)
	}
}
