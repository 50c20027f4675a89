package processor

import "github.com/twmb/franz-go/pkg/kgo"

// ApplicationID is the application's id: its consumer group and the prefix
// of its internal topics.
func (a *App) ApplicationID() string { return a.cfg.appID }

// NewClient returns a Kafka client with the app's brokers and its TLS and
// SASL settings, for tools beside the app (a view of its group, a tail of
// its dead-letter topics), with own's options after the app's. The caller
// closes it. It is never the app's own client: it joins no group and
// produces nothing unless own says so.
func (a *App) NewClient(own ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(a.cfg.kgoOpts(own...)...)
}
