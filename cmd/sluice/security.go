package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cast"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security keys, spelled as in the Java client and librdkafka.
const (
	keySecurityProtocol = "security.protocol"
	keySASLMechanism    = "sasl.mechanism"
	keySASLUsername     = "sasl.username"
	keySASLPassword     = "sasl.password"
	keySASLPasswordFile = "sasl.password.file"
	keySSLCA            = "ssl.ca.location"
	keySSLCert          = "ssl.certificate.location"
	keySSLKey           = "ssl.key.location"
)

// security.protocol values, in Kafka's spelling lower-cased.
const (
	protoPlaintext     = "plaintext"
	protoSSL           = "ssl"
	protoSASLPlaintext = "sasl_plaintext"
	protoSASLSSL       = "sasl_ssl"
)

// sasl.mechanism values.
const (
	mechPlain     = "PLAIN"
	mechSCRAM256  = "SCRAM-SHA-256"
	mechSCRAM512  = "SCRAM-SHA-512"
	mechanismList = mechPlain + ", " + mechSCRAM256 + " or " + mechSCRAM512
)

// addSecurityFlags adds the flags of the security keys. sasl.password has
// none on purpose: a command line is visible to every local user (ps,
// /proc) and stays in shell history; the password comes from
// SLUICE_SASL_PASSWORD, the config file or --sasl-password-file.
func addSecurityFlags(f *pflag.FlagSet) {
	f.String("security-protocol", protoPlaintext, "security.protocol: plaintext, ssl, sasl_plaintext or sasl_ssl")
	f.String("sasl-mechanism", "", "sasl.mechanism: "+mechanismList)
	f.String("sasl-username", "", "sasl.username: the SASL user")
	f.String("sasl-password-file", "", "sasl.password.file: read the SASL password from this `file` (or set SLUICE_SASL_PASSWORD)")
	f.String("ssl-ca", "", "ssl.ca.location: PEM `file` of the certificate authorities to trust (default: the system's)")
	f.String("ssl-cert", "", "ssl.certificate.location: PEM `file` of the client certificate, for mutual TLS (with --ssl-key)")
	f.String("ssl-key", "", "ssl.key.location: PEM `file` of the client certificate's private key")
}

// secret is a string that prints masked however it is formatted, marshalled
// or logged, so that a configuration shown in a log line or a test failure
// does not leak it.
type secret string

const secretMask = "********"

func (secret) Format(f fmt.State, _ rune)   { fmt.Fprint(f, secretMask) }
func (secret) MarshalText() ([]byte, error) { return []byte(secretMask), nil }
func (secret) LogValue() slog.Value         { return slog.StringValue(secretMask) }

// reveal returns the password, for the SASL mechanism only.
func (s secret) reveal() string { return string(s) }

// security is the connection security of an instance's clients.
type security struct {
	Protocol     string // one of the proto* constants
	Mechanism    string // one of the mech* constants, or empty
	Username     string
	Password     secret // from sasl.password or sasl.password.file
	PasswordFile string
	CA           string
	Cert         string
	Key          string

	opts []kgo.Opt // built once at load, so that bad files fail the start
}

// sasl reports whether the protocol authenticates with SASL.
func (s security) sasl() bool { return s.Protocol == protoSASLPlaintext || s.Protocol == protoSASLSSL }

// tls reports whether the protocol encrypts with TLS.
func (s security) tls() bool { return s.Protocol == protoSSL || s.Protocol == protoSASLSSL }

// loadSecurity resolves the security keys, rejecting invalid values and
// combinations with the keys named, and builds the client options. No
// message carries a password.
func (r *resolver) loadSecurity() security {
	s := security{
		Protocol:     strings.ToLower(r.str(keySecurityProtocol)),
		Mechanism:    strings.ToUpper(r.str(keySASLMechanism)),
		Username:     r.str(keySASLUsername),
		PasswordFile: r.str(keySASLPasswordFile),
		CA:           r.str(keySSLCA),
		Cert:         r.str(keySSLCert),
		Key:          r.str(keySSLKey),
	}
	password := r.password()
	switch s.Protocol {
	case "":
		s.Protocol = protoPlaintext
	case protoPlaintext, protoSSL, protoSASLPlaintext, protoSASLSSL:
	default:
		r.fail(keySecurityProtocol, strconv.Quote(s.Protocol), errors.New("want plaintext, ssl, sasl_plaintext or sasl_ssl"))
		return s
	}
	failed := len(r.errs)

	if s.sasl() {
		switch s.Mechanism {
		case mechPlain, mechSCRAM256, mechSCRAM512:
		case "":
			r.requireFor(keySASLMechanism, s.Protocol)
		default:
			r.fail(keySASLMechanism, strconv.Quote(s.Mechanism), errors.New("want "+mechanismList))
		}
		if s.Username == "" {
			r.requireFor(keySASLUsername, s.Protocol)
		}
		switch {
		case password != "" && s.PasswordFile != "":
			r.conflict(keySASLPassword, keySASLPasswordFile)
		case password == "" && s.PasswordFile == "":
			r.bad = append(r.bad, keySASLPassword)
			r.errs = append(r.errs, fmt.Errorf("%s or %s is required with %s %s (%s, config file, or --sasl-password-file)",
				keySASLPassword, keySASLPasswordFile, keySecurityProtocol, s.Protocol, envName(keySASLPassword)))
		case s.PasswordFile != "":
			password = r.readPasswordFile(s.PasswordFile)
		}
		s.Password = secret(password)
	} else {
		for _, k := range []struct{ key, val string }{
			{keySASLMechanism, s.Mechanism}, {keySASLUsername, s.Username},
			{keySASLPassword, password}, {keySASLPasswordFile, s.PasswordFile},
		} {
			if k.val != "" {
				r.mismatch(k.key, s.Protocol, "sasl_plaintext or sasl_ssl")
			}
		}
	}
	if !s.tls() {
		for _, k := range []struct{ key, val string }{{keySSLCA, s.CA}, {keySSLCert, s.Cert}, {keySSLKey, s.Key}} {
			if k.val != "" {
				r.mismatch(k.key, s.Protocol, "ssl or sasl_ssl")
			}
		}
	} else {
		switch {
		case s.Cert != "" && s.Key == "":
			r.missingPair(keySSLCert, keySSLKey)
		case s.Key != "" && s.Cert == "":
			r.missingPair(keySSLKey, keySSLCert)
		}
	}
	if len(r.errs) > failed {
		return s
	}

	if s.tls() {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.CA != "" {
			cfg.RootCAs = r.readCA(s.CA)
		}
		if s.Cert != "" {
			cert, err := tls.LoadX509KeyPair(s.Cert, s.Key)
			if err != nil {
				r.bad = append(r.bad, keySSLCert, keySSLKey)
				r.errs = append(r.errs, fmt.Errorf("invalid %s %s with %s %s: %w", keySSLCert, s.Cert, keySSLKey, s.Key, err))
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		// franz-go sets ServerName per broker from the address it
		// dials, so one config serves every broker.
		s.opts = append(s.opts, kgo.DialTLSConfig(cfg))
	}
	if s.sasl() && s.Password != "" {
		s.opts = append(s.opts, kgo.SASL(s.saslMechanism()))
	}
	return s
}

func (s security) saslMechanism() sasl.Mechanism {
	switch s.Mechanism {
	case mechPlain:
		return plain.Auth{User: s.Username, Pass: s.Password.reveal()}.AsMechanism()
	case mechSCRAM256:
		return scram.Auth{User: s.Username, Pass: s.Password.reveal()}.AsSha256Mechanism()
	default:
		return scram.Auth{User: s.Username, Pass: s.Password.reveal()}.AsSha512Mechanism()
	}
}

// password reads sasl.password.
func (r *resolver) password() string { return r.secretValue(keySASLPassword) }

// secretValue reads a secret key (sasl.password, http.token). Unlike
// resolver.str it does not trim: spaces may be part of a password. Nested
// YAML puts sasl.password.file below sasl.password, so a map there means
// the key itself is unset.
func (r *resolver) secretValue(key string) string {
	switch val := r.v.Get(key).(type) {
	case nil:
		return ""
	case map[string]any:
		return ""
	case []any:
		r.fail(key, val, errors.New("want a single value"))
		return ""
	default:
		s, err := cast.ToStringE(val)
		if err != nil {
			r.fail(key, val, errors.New("want a string"))
		}
		return s
	}
}

// readPasswordFile reads sasl.password.file.
func (r *resolver) readPasswordFile(path string) string {
	return r.readSecretFile(keySASLPasswordFile, path)
}

// readSecretFile returns the content of the file that key names without
// its line ending: a file written by echo or an editor ends in one, and a
// Kubernetes secret may or may not.
func (r *resolver) readSecretFile(key, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		r.fail(key, path, err)
		return ""
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if pw == "" {
		r.fail(key, path, errors.New("the file is empty"))
	}
	return pw
}

func (r *resolver) readCA(path string) *x509.CertPool {
	data, err := os.ReadFile(path)
	if err != nil {
		r.fail(keySSLCA, path, err)
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		r.fail(keySSLCA, path, errors.New("no PEM certificate in the file"))
	}
	return pool
}

// requireFor reports key missing for the protocol.
func (r *resolver) requireFor(key, protocol string) {
	r.bad = append(r.bad, key)
	r.errs = append(r.errs, fmt.Errorf("%s is required with %s %s (%s or config file)", key, keySecurityProtocol, protocol, r.where(key)))
}

// mismatch reports key set although the protocol does not use it: most
// likely the protocol is what the user forgot, and a silently ignored CA or
// password would leave them debugging a connection that was never secured.
func (r *resolver) mismatch(key, protocol, want string) {
	r.bad = append(r.bad, key)
	r.errs = append(r.errs, fmt.Errorf("%s is set (from %s) but %s is %s (from %s): use %s, or unset %s",
		key, r.source(key), keySecurityProtocol, protocol, r.source(keySecurityProtocol), want, key))
}

func (r *resolver) conflict(a, b string) {
	r.bad = append(r.bad, a, b)
	r.errs = append(r.errs, fmt.Errorf("%s (from %s) and %s (from %s) are both set: give one", a, r.source(a), b, r.source(b)))
}

func (r *resolver) missingPair(have, missing string) {
	r.bad = append(r.bad, missing)
	r.errs = append(r.errs, fmt.Errorf("%s is set (from %s) but %s is not: a client certificate needs both (%s or config file)",
		have, r.source(have), missing, r.where(missing)))
}

// where names the flag (if any) and the environment variable of key.
func (r *resolver) where(key string) string {
	for _, k := range appKeys {
		if k.key == key && k.flag != "" {
			return "--" + k.flag + ", " + envName(key)
		}
	}
	return envName(key)
}
