package sluicedb

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/sink"
)

func TestParseURL(t *testing.T) {
	t.Setenv(PasswordEnv, "")
	u, err := ParseURL("postgres://app:p%40ss:w@db.example:6543/billing?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "postgres" || u.User != "app" || u.Password != "p@ss:w" || u.Host != "db.example" || u.Port != 6543 || u.Database != "billing" || u.Params.Get("sslmode") != "disable" {
		t.Fatalf("%+v", u)
	}
	if r := u.Redacted(); strings.Contains(r, "p%40ss") || strings.Contains(r, "p@ss") || r != "postgres://app@db.example:6543/billing?sslmode=disable" {
		t.Fatalf("Redacted = %q", r)
	}
	if back, err := ParseURL(u.String()); err != nil || back.Password != u.Password {
		t.Fatalf("String does not round-trip: %v %v", back, err)
	}
	for raw, want := range map[string]URL{
		"mysql://root@localhost/x":    {Scheme: "mysql", User: "root", Host: "localhost", Port: 3306, Database: "x"},
		"mariadb://root@[::1]:3307/x": {Scheme: "mysql", User: "root", Host: "::1", Port: 3307, Database: "x"},
		"postgresql://u@h/d":          {Scheme: "postgres", User: "u", Host: "h", Port: 5432, Database: "d"},
	} {
		got, err := ParseURL(raw)
		if err != nil || got.Scheme != want.Scheme || got.User != want.User || got.Host != want.Host || got.Port != want.Port || got.Database != want.Database || got.Password != "" {
			t.Errorf("ParseURL(%q) = %+v, %v", raw, got, err)
		}
	}
	if got, _ := ParseURL("mariadb://root@[::1]:3307/x"); got.Redacted() != "mysql://root@[::1]:3307/x" {
		t.Errorf("IPv6 Redacted = %q", got.Redacted())
	}
	// The password from the environment, only when the URL has none.
	t.Setenv(PasswordEnv, "from-env")
	if u, _ := ParseURL("mysql://app@h/d"); u.Password != "from-env" {
		t.Errorf("password from %s: %q", PasswordEnv, u.Password)
	}
	if u, _ := ParseURL("mysql://app:inline@h/d"); u.Password != "inline" {
		t.Errorf("the URL's password lost to the environment's: %q", u.Password)
	}
	for _, bad := range []string{"http://u@h/d", "postgres://h/d", "postgres://u@h", "postgres://u@h/a/b", "postgres://u@:5/d", "postgres://u@h:99999/d", "postgres://u:secret@h:x/d", "%zz://u:secret@h/d"} {
		_, err := ParseURL(bad)
		if !errors.Is(err, ErrURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrURL", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q)'s error shows the password: %v", bad, err)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Table[string, int]{Name: "t", Columns: []Column{{Name: "k"}, {Name: "v"}}, PrimaryKey: []string{"k"},
		Row: func(r recT) ([]any, error) { return nil, nil }}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Table[string, int]{
		{},
		{Name: "t", Columns: []Column{{Name: "k"}, {Name: "k"}}, Row: ok.Row},
		{Name: "t", Columns: []Column{{Name: "k"}}, PrimaryKey: []string{"x"}, Row: ok.Row},
		{Name: "t", Columns: []Column{{Name: "k"}}, Row: ok.Row, Deleted: func(recT) bool { return false }},
		{Name: "t", Columns: []Column{{Name: "k"}}, Row: ok.Row, Create: true},
		{Name: "t", Columns: []Column{{Name: "k"}}, Row: ok.Row, Insert: true},
		{Name: "t", Columns: []Column{{Name: "k"}}, PrimaryKey: []string{"k"}, Row: ok.Row, Deleted: func(recT) bool { return false }},
		{Name: "t", Columns: []Column{{Name: "k"}}, PrimaryKey: []string{"k"}, Row: ok.Row, Insert: true,
			Deleted: func(recT) bool { return false }, Key: func(recT) ([]any, error) { return nil, nil }},
	}
	for i, b := range bad {
		if err := b.Validate(); !errors.Is(err, ErrTable) {
			t.Errorf("case %d: Validate = %v, want ErrTable", i, err)
		}
	}
}

type recT = sink.Record[string, int]
