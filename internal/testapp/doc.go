// Package testapp runs a sluice example in-process for the tests of the
// tools beside an application (the group view, its command and its HTTP
// endpoint): a real App on the test cluster, its topics created, stopped
// when the test ends.
//
//	wc := testapp.WordCount(t, ctx, addrs, appID, "127.0.0.1:18090")
//	wc.Produce(t, 1, "a line", "")
//	... describe it ...
//	if err := wc.Stop(); err != nil { t.Fatal(err) }
package testapp
