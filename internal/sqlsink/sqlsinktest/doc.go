// Package sqlsinktest is the test suite both database adapters pass
// against a real server (internal/testdb): two-phase commit (prepared =
// invisible, survives a restart and a killed session; committed exactly
// once; rolled back gone; ErrNotPrepared), offsets mode (skips what is
// stored, replays exactly), rejected rows told from lost connections, and
// adversarial values read back byte for byte. Each checker has a negative
// control showing it can fail.
package sqlsinktest
