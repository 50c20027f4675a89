package topologytest_test

import (
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// TestInputLimits pins down what happens to each kind of bad input under the
// default policies (dead-letter for what cannot be read, fail for what cannot
// be written) and under Continue.
func TestInputLimits(t *testing.T) {
	build := func() *topology.Topology {
		tp := topology.New()
		s := topology.From(tp, "in", serde.Int64, serde.String)
		topology.To(topology.MapValues(s, func(v string) string { return strings.Repeat(v, 2) }), "out", serde.Int64, serde.String)
		return tp
	}
	key := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	cases := []struct {
		name       string
		key, value []byte
		ts         int64
		class      topology.ErrorClass
	}{
		{"null key where an int64 key is needed", nil, []byte("v"), 1, topology.Deserialization},
		{"invalid UTF-8 value", key, []byte{0xff}, 1, topology.Deserialization},
		{"negative timestamp", key, []byte("v"), -5, topology.Deserialization},
		{"timestamp past the year 9999", key, []byte("v"), 253402300800000, topology.Deserialization},
		{"output over the record limit", key, []byte(strings.Repeat("x", 600)), 1, topology.Production},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, cont := range []bool{false, true} {
				opts := []topologytest.Option{topologytest.MaxRecordBytes(1000), topologytest.ApplicationID("app")}
				if cont {
					opts = append(opts, topologytest.OnError(c.class, topology.Always(topology.Continue)))
				}
				d, err := topologytest.New(build(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				in := topologytest.NewInputTopic(d, "in", serde.Int64, serde.String)
				err = in.PipeBytes(c.key, c.value, c.ts)
				out, _ := topologytest.NewOutputTopic(d, "out", serde.Bytes, serde.Bytes).ReadRecords()
				dead, _ := topologytest.NewOutputTopic(d, "app-dlq", serde.Bytes, serde.Bytes).ReadRecords()
				switch {
				case len(out) != 0:
					t.Errorf("continue=%t: the bad record produced %d outputs", cont, len(out))
				case cont && (err != nil || len(dead) != 0):
					t.Errorf("continue: err %v, %d dead letters", err, len(dead))
				case !cont && c.class == topology.Deserialization && (err != nil || len(dead) != 1):
					t.Errorf("default: err %v, %d dead letters, want the record dead-lettered", err, len(dead))
				case !cont && c.class == topology.Production && (err == nil || len(dead) != 0):
					t.Errorf("default: err %v, %d dead letters, want the instance stopped", err, len(dead))
				}
				d.Close()
			}
		})
	}
}
