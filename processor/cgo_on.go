//go:build cgo

package processor

// cgoEnabled says whether the build has cgo (see pebbleInGoHeap).
const cgoEnabled = true
