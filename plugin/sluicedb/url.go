package sluicedb

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// PasswordEnv is the variable ParseURL takes the password from when the URL
// has none, so that it need not be on a command line.
const PasswordEnv = "SLUICE_DB_PASSWORD"

// ErrURL is wrapped by ParseURL's errors.
var ErrURL = errors.New("sluicedb: bad database URL")

// URL is a parsed database URL: postgres://user:password@host:port/db or
// mysql://user:password@host:port/db, with driver parameters in the query.
type URL struct {
	Scheme   string // "postgres" or "mysql" (postgresql and mariadb are read as these)
	User     string
	Password string
	Host     string
	Port     int // 5432 or 3306 when the URL names none
	Database string
	Params   url.Values
}

// ParseURL parses raw. When raw has no password, the value of PasswordEnv
// (if set) is the password.
func ParseURL(raw string) (URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes its input, password included.
		return URL{}, fmt.Errorf("%w: %s", ErrURL, redactRaw(raw))
	}
	var out URL
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
		out.Scheme, out.Port = "postgres", 5432
	case "mysql", "mariadb":
		out.Scheme, out.Port = "mysql", 3306
	default:
		return URL{}, fmt.Errorf("%w: scheme %q, want postgres:// or mysql://", ErrURL, u.Scheme)
	}
	out.Host = u.Hostname()
	if out.Host == "" {
		return URL{}, fmt.Errorf("%w: no host in %s", ErrURL, redactRaw(raw))
	}
	if p := u.Port(); p != "" {
		if out.Port, err = strconv.Atoi(p); err != nil || out.Port <= 0 || out.Port > 65535 {
			return URL{}, fmt.Errorf("%w: port %q", ErrURL, p)
		}
	}
	out.Database = strings.TrimPrefix(u.Path, "/")
	if out.Database == "" || strings.Contains(out.Database, "/") {
		return URL{}, fmt.Errorf("%w: want one database name after the host in %s", ErrURL, redactRaw(raw))
	}
	if u.User != nil {
		out.User = u.User.Username()
		out.Password, _ = u.User.Password()
	}
	if out.User == "" {
		return URL{}, fmt.Errorf("%w: no user in %s", ErrURL, redactRaw(raw))
	}
	if out.Password == "" {
		out.Password = os.Getenv(PasswordEnv)
	}
	out.Params = u.Query()
	return out, nil
}

func (u URL) url(password bool) *url.URL {
	v := &url.URL{Scheme: u.Scheme, Host: u.Host + ":" + strconv.Itoa(u.Port), Path: "/" + u.Database, RawQuery: u.Params.Encode()}
	if strings.Contains(u.Host, ":") {
		v.Host = "[" + u.Host + "]:" + strconv.Itoa(u.Port)
	}
	if password && u.Password != "" {
		v.User = url.UserPassword(u.User, u.Password)
	} else {
		v.User = url.User(u.User)
	}
	return v
}

// String is the URL with its password.
func (u URL) String() string { return u.url(true).String() }

// Redacted is the URL without its password, for messages.
func (u URL) Redacted() string { return u.url(false).String() }

// redactRaw drops what lies between the first ':' after the scheme and the
// '@' of a URL that did not parse.
func redactRaw(raw string) string {
	at := strings.LastIndex(raw, "@")
	start := strings.Index(raw, "://")
	if at < 0 || start < 0 || at < start {
		return raw
	}
	userinfo := raw[start+3 : at]
	if c := strings.Index(userinfo, ":"); c >= 0 {
		return raw[:start+3] + userinfo[:c] + ":xxxxx" + raw[at:]
	}
	return raw
}
