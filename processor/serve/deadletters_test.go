package serve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
)

// TestDeadLetters: GET /deadletters reads the app's dead-letter topics at
// read_committed, newest first, at most limit, with the sluice.* headers
// parsed and bytes that are not UTF-8 in base64. Negative controls: a
// record of an aborted transaction is not shown, a topic that does not
// exist is named in "error", and a bad limit is a 400.
func TestDeadLetters(t *testing.T) {
	brokers := testbroker.Addrs(t)
	id := testbroker.Unique(t, "dlq-view-")
	srv := consoleServer(t, id+"-", processor.ApplicationID(id), processor.Brokers(brokers...), processor.StateDir(t.TempDir()))
	ask := func(query string) (int, deadLettersAnswer, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/deadletters" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a deadLettersAnswer
		var raw json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&raw)
		_ = json.Unmarshal(raw, &a)
		return resp.StatusCode, a, string(raw)
	}

	// Neither topic exists yet: the answer says so, with no records.
	code, a, body := ask("")
	if code != 200 || len(a.Records) != 0 || !strings.Contains(a.Error, id+"-dlq") || !strings.Contains(a.Error, id+"-lines-dlq") {
		t.Errorf("no topics: %d %s", code, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(id+"-writer"), kgo.DefaultProduceTopic(id+"-lines-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 2, 1, nil, id+"-lines-dlq", id+"-dlq"); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(1_700_000_000_000)
	hdr := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	txn := func(commit bool, rs ...*kgo.Record) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	var recs []*kgo.Record
	for i := range 6 {
		recs = append(recs, &kgo.Record{Partition: int32(i % 2), Key: []byte{byte('a' + i)}, Value: []byte("line"), Timestamp: base.Add(time.Duration(i) * time.Second),
			Headers: []kgo.RecordHeader{hdr("sluice.source.topic", id+"-lines"), hdr("sluice.source.partition", "1"), hdr("sluice.source.offset", "41"),
				hdr("sluice.error.class", "processing"), hdr("sluice.error.message", "boom")}})
	}
	txn(true, recs[:3]...)
	txn(true, recs[3:]...)
	// Newest of all, not UTF-8, in the app's own topic; then an aborted one
	// newer still.
	txn(true, &kgo.Record{Topic: id + "-dlq", Value: []byte{0xff, 0x00}, Timestamp: base.Add(time.Minute),
		Headers: []kgo.RecordHeader{{Key: "raw", Value: []byte{0xfe}}}})
	txn(false, &kgo.Record{Topic: id + "-dlq", Value: []byte("aborted"), Timestamp: base.Add(time.Hour)})

	code, a, body = ask("?limit=4")
	if code != 200 || a.Error != "" || !a.Complete || len(a.Records) != 4 {
		t.Fatalf("limit 4: %d %s", code, body)
	}
	first := a.Records[0]
	if first.Topic != id+"-dlq" || first.Value == nil || !first.ValueBase64 || *first.Value != base64.StdEncoding.EncodeToString([]byte{0xff, 0x00}) ||
		first.Key != nil || len(first.Headers) != 1 || !first.Headers[0].Base64 || first.Origin != nil {
		t.Errorf("the newest: %+v", first)
	}
	for i, r := range a.Records[1:] {
		want := recs[5-i]
		if r.Timestamp != want.Timestamp.UnixMilli() || r.Key == nil || *r.Key != string(want.Key) || r.Class != "processing" || r.Message != "boom" ||
			r.Origin == nil || *r.Origin != (deadLetterOrigin{Topic: id + "-lines", Partition: 1, Offset: 41}) {
			t.Errorf("record %d: %+v (origin %+v), want key %s", i+1, r, r.Origin, want.Key)
		}
	}
	if strings.Contains(body, "aborted") {
		t.Errorf("an aborted dead letter is shown: %s", body)
	}
	if code, _, body := ask("?limit=0"); code != 400 || !strings.Contains(body, "limit") {
		t.Errorf("limit 0: %d %s", code, body)
	}
	if code, a, _ := ask(""); code != 200 || len(a.Records) != 7 {
		t.Errorf("all: %d, %d records", code, len(a.Records))
	}
}
