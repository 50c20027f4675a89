// Package diskfault damages store files on disk the way a failing disk
// would, for the tests of corruption handling (store, processor). It holds
// no test double: the files are real Pebble tables, damaged in place.
package diskfault
