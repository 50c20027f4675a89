package processor

import (
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/optview"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/txn"
)

// TestOptviewReadsTheSharedOptionsOnly: every option is either one the test
// driver shares (read back with its value) or refused, none dropped.
func TestOptviewReadsTheSharedOptionsOnly(t *testing.T) {
	shared := map[string]struct {
		o    Opt
		read func(optview.Shared) bool
	}{
		"ApplicationID":   {ApplicationID("a"), func(s optview.Shared) bool { return s.AppID != nil && *s.AppID == "a" }},
		"FoldUpdates":     {FoldUpdates(true), func(s optview.Shared) bool { return s.FoldUpdates != nil && *s.FoldUpdates }},
		"DeadLetterTopic": {DeadLetterTopic("d"), func(s optview.Shared) bool { return s.DeadLetter != nil && *s.DeadLetter == "d" }},
		"MaxRecordBytes":  {MaxRecordBytes(7), func(s optview.Shared) bool { return s.MaxRecordBytes != nil && *s.MaxRecordBytes == 7 }},
		"IdleTimeout":     {IdleTimeout(time.Second), func(s optview.Shared) bool { return s.IdleTimeout != nil && *s.IdleTimeout == time.Second }},
		"OnError": {OnError(topology.Processing, func(topology.ErrorContext) topology.Action { return topology.Continue }),
			func(s optview.Shared) bool { return len(s.Errors) == 1 && s.Errors[exec.Processing] != nil }},
	}
	for name, c := range shared {
		s, err := optview.Read(c.o)
		if err != nil || !c.read(s) {
			t.Errorf("%s: %+v, %v", name, s, err)
		}
	}
	refused := map[string]Opt{
		"Brokers": Brokers("k:1"), "Guarantee": Guarantee(txn.AtLeastOnce), "CommitInterval": CommitInterval(time.Second),
		"StateDir": StateDir("/x"), "InstanceID": InstanceID("i"), "SessionTimeout": SessionTimeout(time.Second),
		"RebalanceTimeout": RebalanceTimeout(time.Second), "TransactionTimeout": TransactionTimeout(time.Second),
		"StreamThreads": StreamThreads(2), "Logger": Logger(slog.Default()), "ClientOptions": ClientOptions(kgo.ClientID("c")),
		"ClientHooks": ClientHooks(struct{ kgo.Hook }{}), "AdvertisedEndpoint": AdvertisedEndpoint("h:1"),
		"StandbyReplicas": StandbyReplicas(1), "AcceptableRecoveryLag": AcceptableRecoveryLag(1), "MaxWarmupReplicas": MaxWarmupReplicas(5),
		"ProbingRebalanceInterval": ProbingRebalanceInterval(time.Hour),
	}
	for name, o := range refused {
		if s, err := optview.Read(o); err == nil {
			t.Errorf("%s: read as %+v, want a refusal", name, s)
		}
	}
	if _, err := optview.Read("not an option"); err == nil {
		t.Error("a string read as an option")
	}
}
