package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certs names the PEM files of a throwaway certificate authority and of the
// server and client certificates it signed, as written by WriteCerts.
type Certs struct {
	CA         string // the authority's certificate: the trust root of both sides
	ServerCert string // for 127.0.0.1, ::1 and localhost
	ServerKey  string
	ClientCert string // for client authentication (mutual TLS)
	ClientKey  string
	// PeerCert is for both server and client authentication, for
	// 127.0.0.1, ::1 and localhost: a sluice instance's HTTP server, whose
	// queries forwarded to the other instances present it too.
	PeerCert string
	PeerKey  string
}

// certValidity is long enough for a development broker that runs for days,
// short enough that a leaked throwaway key soon stops mattering.
const certValidity = 30 * 24 * time.Hour

// WriteCerts generates a fresh certificate authority, a server certificate
// for the loopback addresses, a client certificate and a peer certificate
// (both), and writes them to dir as ca.pem, server.pem, server-key.pem,
// client.pem, client-key.pem, peer.pem and peer-key.pem (keys readable by
// the owner only). Each call makes a new authority, so two
// calls give two authorities that do not trust each other. It is for tests
// and the development broker, never for production.
func WriteCerts(dir string) (Certs, error) {
	c := Certs{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
		PeerCert:   filepath.Join(dir, "peer.pem"),
		PeerKey:    filepath.Join(dir, "peer-key.pem"),
	}
	// The clock is pushed back so that a peer whose clock is slightly
	// behind still accepts the certificates.
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Certs{}, fmt.Errorf("broker: certs: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice throwaway CA"},
		NotBefore:             now,
		NotAfter:              now.Add(certValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Certs{}, fmt.Errorf("broker: certs: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Certs{}, fmt.Errorf("broker: certs: CA: %w", err)
	}
	if err := writePEM(c.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return Certs{}, err
	}
	leaves := []struct {
		cert, key string
		tmpl      *x509.Certificate
	}{
		{c.ServerCert, c.ServerKey, &x509.Certificate{
			SerialNumber: big.NewInt(2),
			Subject:      pkix.Name{CommonName: "sluice broker"},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			DNSNames:     []string{"localhost"},
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
		{c.ClientCert, c.ClientKey, &x509.Certificate{
			SerialNumber: big.NewInt(3),
			Subject:      pkix.Name{CommonName: "sluice client"},
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{c.PeerCert, c.PeerKey, &x509.Certificate{
			SerialNumber: big.NewInt(4),
			Subject:      pkix.Name{CommonName: "sluice instance"},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			DNSNames:     []string{"localhost"},
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}},
	}
	for _, l := range leaves {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return Certs{}, fmt.Errorf("broker: certs: %w", err)
		}
		l.tmpl.NotBefore, l.tmpl.NotAfter = now, now.Add(certValidity)
		l.tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, l.tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return Certs{}, fmt.Errorf("broker: certs: %s: %w", l.tmpl.Subject.CommonName, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return Certs{}, fmt.Errorf("broker: certs: %w", err)
		}
		if err := writePEM(l.cert, "CERTIFICATE", der, 0o644); err != nil {
			return Certs{}, err
		}
		if err := writePEM(l.key, "PRIVATE KEY", keyDER, 0o600); err != nil {
			return Certs{}, err
		}
	}
	return c, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("broker: certs: %w", err)
	}
	return nil
}

// ServerTLS returns the broker's TLS config for Config.TLS: it presents the
// server certificate and, with requireClientCert, accepts only clients whose
// certificate the authority signed.
func (c Certs) ServerTLS(requireClientCert bool) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.ServerCert, c.ServerKey)
	if err != nil {
		return nil, fmt.Errorf("broker: server certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if requireClientCert {
		pool, err := c.Pool()
		if err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = pool
	}
	return cfg, nil
}

// ClientTLS returns a client TLS config that trusts the authority and, with
// clientCert, presents the client certificate: what a test passes to
// kgo.DialTLSConfig.
func (c Certs) ClientTLS(clientCert bool) (*tls.Config, error) {
	pool, err := c.Pool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if clientCert {
		cert, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("broker: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Pool returns a certificate pool holding only the authority.
func (c Certs) Pool() (*x509.CertPool, error) {
	data, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, fmt.Errorf("broker: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("broker: CA: no PEM certificate in " + c.CA)
	}
	return pool, nil
}

// PeerTLS returns the TLS of a sluice instance's HTTP port that requires
// the authority's client certificates: server presents the peer
// certificate and verifies a client certificate when one is given
// (tls.VerifyClientCertIfGiven, so that a probe without one reaches
// /healthz); peer, for the instance's queries to the others, trusts the
// authority and presents the peer certificate. pool holds the authority.
func (c Certs) PeerTLS() (server, peer *tls.Config, pool *x509.CertPool, err error) {
	pool, err = c.Pool()
	if err != nil {
		return nil, nil, nil, err
	}
	own, err := tls.LoadX509KeyPair(c.PeerCert, c.PeerKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("broker: peer certificate: %w", err)
	}
	server = &tls.Config{Certificates: []tls.Certificate{own}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	peer = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{own}, MinVersion: tls.VersionTLS12}
	return server, peer, pool, nil
}
