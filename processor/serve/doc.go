// Package serve serves a sluice instance over HTTP: the interactive
// queries (/stores/{store}/keys/{key} and /stores/{store}/keys, forwarded
// to the key's owner and fanned out over the instances), /tasks, /readyz,
// /healthz, /topology and, if given, /metrics. A program that embeds sluice
// mounts them on its own mux, so it answers exactly as `sluice run --http`:
//
//	mux := http.NewServeMux()
//	serve.Register(mux, app, serve.Logger(log),
//		serve.Metrics(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
//	go http.Serve(ln, mux) // ln's address: processor.AdvertisedEndpoint
//
// The paths and the JSON of every answer are a contract (README
// "Interactive queries"). Instances reach each other at the endpoint each
// advertises (processor.AdvertisedEndpoint), over plain HTTP.
//
// Register also mounts the web console at / (README "Web console",
// DESIGN.md "Web console"): embedded files with no build step, and the
// JSON it reads besides the endpoints above: /stats, /deadletters, /app.
package serve
