// Package serve serves a sluice instance over HTTP: the interactive
// queries (/stores/{store}/keys/{key} and /stores/{store}/keys, forwarded
// to the key's owner and fanned out over the instances), /tasks, /readyz,
// /healthz, /topology, /instances (the application's group, from Kafka)
// and, if given, /metrics. A program that embeds sluice
// mounts them on its own mux, so it answers exactly as `sluice run --http`:
//
//	mux := http.NewServeMux()
//	serve.Register(mux, app, serve.Logger(log),
//		serve.Metrics(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
//	go http.Serve(ln, mux) // ln's address: processor.AdvertisedEndpoint
//
// The paths and the JSON of every answer are a contract (README
// "Interactive queries"). Instances reach each other at the endpoint each
// advertises (processor.AdvertisedEndpoint), over plain HTTP unless
// PeerTLS says https.
//
// The endpoints serve store contents, dead letters and metrics: behind
// BearerToken, ClientCAs or both, every one of them except /healthz and
// /readyz needs the credentials (a browser signs in at /login and carries
// a cookie), and forwarded queries present them to the owner:
//
//	sec := []serve.Opt{serve.BearerToken(token), serve.ClientCAs(cas),
//		serve.PeerTLS(&tls.Config{RootCAs: cas, Certificates: []tls.Certificate{own}})}
//	serve.Register(mux, app, sec...)
//	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{own},
//		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: cas}}
//	go srv.ServeTLS(ln, "", "")
//
// Guard puts a program's own endpoints on the same server behind the same
// credentials.
//
// Register also mounts the web console at / (README "Web console",
// DESIGN.md "Web console"): embedded files with no build step, and the
// JSON it reads besides the endpoints above: /stats, /deadletters, /app.
package serve
