package processor

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// clientLogger passes the Kafka client's own log lines (franz-go's: group
// joins, assignments, transaction ends and the offsets they reset to) to
// the instance's logger at debug level, with client=kafka. They are what
// to read when a rebalance or a transaction misbehaves; at the default
// level they stay off, since franz-go logs every join and commit.
type clientLogger struct{ log *slog.Logger }

// clientLogOpts returns the client option that wires l in, or none when l
// does not log at debug level.
func clientLogOpts(l *slog.Logger) []kgo.Opt {
	if l == nil || !l.Enabled(context.Background(), slog.LevelDebug) {
		return nil
	}
	return []kgo.Opt{kgo.WithLogger(clientLogger{l.With("client", "kafka")})}
}

func (c clientLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (c clientLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	c.log.Debug(msg, append(keyvals, "client_level", level.String())...)
}
