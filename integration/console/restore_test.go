package console

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/processor"
)

// restoring: an instance whose counting tasks restore a changelog that the
// embedded broker serves one fetch of and then holds shows them restoring,
// with the progress made (some, not all); once the broker lets the
// fetches go, the same rows show running. The hold is kfake's own
// (SleepControl), on a broker of this subtest's own.
func restoring(t *testing.T, ctx context.Context) {
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	brokers := b.Addrs()
	const appID = "console-restore"
	changelog := appID + "-counts-changelog"
	createTopics(t, brokers, "restore-lines", "restore-counts", "restore-dlq", changelog)
	// About 4 MiB of changelog per partition: a fetch of 1 MiB a partition
	// (the instance's max.partition.fetch.bytes, below; its default of 64
	// KiB would stop short of the first step) reads a quarter of it, past
	// the first steps of the restore's progress (one every 4,096 records).
	cl, pctx := kafka(t, brokers)
	for range 60 {
		rs := make([]*kgo.Record, 1000)
		for i := range rs {
			// Random keys: the producer compresses, and a fetch's
			// bound is on compressed bytes.
			key := make([]byte, 100)
			_, _ = rand.Read(key)
			rs[i] = &kgo.Record{Topic: changelog, Key: key, Value: []byte{0, 0, 0, 0, 0, 0, 0, 1}}
		}
		if err := cl.ProduceSync(pctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	topics, err := kadm.NewClient(cl).ListTopics(pctx, changelog)
	if err != nil {
		t.Fatal(err)
	}
	id := topics[changelog].ID
	// Let each partition's first fetch of the changelog through, then hold
	// the rest until release.
	c := b.Cluster()
	release := make(chan struct{})
	var mu sync.Mutex
	served := map[int32]bool{}
	c.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		hold := false
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			if tp.TopicID != id && tp.Topic != changelog {
				continue
			}
			mu.Lock()
			for _, p := range tp.Partitions {
				if served[p.Partition] {
					hold = true
				}
				served[p.Partition] = true
			}
			mu.Unlock()
		}
		if hold {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)

	inst := start(t, appID, func(endpoint string) (*processor.App, error) {
		return processor.New(examples.WordCount("restore-lines", "restore-counts", "restore-dlq"),
			append(appOpts(brokers, appID, t.TempDir(), endpoint), processor.MaxPartitionFetchBytes(1<<20))...)
	})
	page(t, ctx, chromedp.Navigate(inst.base+"/#/overview"))
	const restoringJS = `[...document.querySelectorAll('#tasks-table tr[data-state="restoring"]')].map(r => {
		const p = r.querySelector('progress');
		return r.dataset.task + ' ' + r.querySelector('.badge').textContent + ' ' + (p ? p.value + '/' + p.max : 'no bar') + ' ' + r.querySelector('.state').textContent;
	})`
	// Restores run one after another: one task restores, held after its
	// first fetch, the other waits.
	waitFor(t, ctx, restoringJS+`.some(s => / [1-9][0-9]*\/[0-9]+ /.test(s))`, `JSON.stringify(`+restoringJS+`)`, 30*time.Second)
	t.Logf("restoring: %q", eval[[]string](t, ctx, restoringJS))
	partial := 0
	for _, r := range eval[[]string](t, ctx, restoringJS) {
		var task, badge string
		var done, total int
		if _, err := fmt.Sscanf(r, "%s %s %d/%d", &task, &badge, &done, &total); err != nil || badge != "restoring" || done >= total || !strings.Contains(r, "% · ") || !strings.HasSuffix(r, " left") {
			t.Errorf("a restoring task reads %q", r)
		}
		if done > 0 {
			partial++
			if pct := fmt.Sprintf(" %d%% · ", done*100/total); !strings.Contains(r, pct) {
				t.Errorf("%q: want %s", r, pct)
			}
		}
	}
	if partial != 1 {
		t.Errorf("%d tasks show progress part way", partial)
	}
	let()
	waitFor(t, ctx, `document.querySelectorAll('#tasks-table tr[data-state="restoring"]').length === 0 && document.querySelectorAll('#tasks-table tr[data-state="running"]').length === 4`, taskRowsJS, 30*time.Second)
}
