package processor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrAuthentication is returned by Run when the brokers refuse the
// instance's credentials (SASL) or the TLS handshake fails (an untrusted
// certificate authority, a missing or refused client certificate, TLS on one
// side only). Only a configuration change cures it, so the instance stops
// at start instead of retrying.
var ErrAuthentication = errors.New("processor: authentication with the brokers failed")

// authWatch is a client hook that notices a broker closing the connection
// in the middle of SASL authentication. Kafka answers bad credentials with
// SASL_AUTHENTICATION_FAILED, which franz-go does not retry, but some
// brokers (kfake among them) close the connection instead, and franz-go
// treats that EOF like any dropped connection: it retries, then reports a
// bare "EOF", which names neither the cause nor the cure. The watch ends
// the wait at the first such close and says what happened.
type authWatch struct {
	cancel context.CancelCauseFunc
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (w authWatch) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != int16(kmsg.SASLAuthenticate) || e2e.ReadErr == nil {
		return
	}
	// A connection dropped during authentication for another reason
	// (a broker restarting at that moment) is indistinguishable here; at
	// start, stopping with a clear error beats retrying into an "EOF".
	w.cancel(fmt.Errorf("%w: broker %s:%d closed the connection during SASL authentication (wrong mechanism, user name or password?): %w",
		ErrAuthentication, meta.Host, meta.Port, e2e.ReadErr))
}

// withAuthWatch returns a context that ends with an ErrAuthentication cause
// when the brokers close the connection during SASL authentication, and the
// client option that watches for it.
func withAuthWatch(ctx context.Context) (context.Context, kgo.Opt, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	return ctx, kgo.WithHooks(authWatch{cancel}), func() { cancel(nil) }
}

// authFailure returns err as a fatal error wrapping ErrAuthentication when
// it shows that the brokers refused the login or the TLS handshake, and nil
// otherwise. ctx is the context (from withAuthWatch) the failed requests ran
// under.
func authFailure(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); errors.Is(cause, ErrAuthentication) {
		return fatalError{cause}
	}
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		record  tls.RecordHeaderError
		op      *net.OpError
		eof     *kgo.ErrFirstReadEOF
	)
	switch {
	case errors.Is(err, ErrAuthentication):
		return fatalError{err}
	case errors.Is(err, kerr.SaslAuthenticationFailed),
		errors.Is(err, kerr.UnsupportedSaslMechanism),
		errors.Is(err, kerr.IllegalSaslState),
		errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &host),
		// A plaintext broker answering a TLS client.
		errors.As(err, &record),
		// crypto/tls reports an alert from the peer (e.g. "certificate
		// required") as a "remote error" operation.
		errors.As(err, &op) && op.Op == "remote error",
		// franz-go's diagnosis of a broker that hangs up at once:
		// SASL or TLS expected by one side only.
		errors.As(err, &eof):
		return fatalError{fmt.Errorf("%w: %w", ErrAuthentication, err)}
	}
	return nil
}
