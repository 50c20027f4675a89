// Package iqwire is the wire format of interactive queries between sluice
// instances: the headers, the JSON bodies of /stores/{store}/keys/{key} and
// /stores/{store}/keys, and the GET that forwards a query to the key's
// owner. The server (processor/serve) and the typed client
// (processor.Query) share it, so the two cannot drift apart. The JSON is a
// public contract (README "Interactive queries"): fields are only added.
package iqwire
