package sluiceprom

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/sluice-streams/sluice/processor"
)

// ClientMetrics registers franz-go's own client metrics (its kprom plugin:
// connections, requests, bytes and records produced and fetched, buffered
// records, per broker) on reg, named sluice_kafka_*, for the instance's
// main client. Pass it to processor.New.
func ClientMetrics(reg prometheus.Registerer) processor.Opt {
	return processor.ClientHooks(kprom.NewMetrics("sluice", kprom.Subsystem("kafka"), kprom.Registerer(reg)))
}
