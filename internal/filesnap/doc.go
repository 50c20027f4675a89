// Package filesnap takes a snapshot of a directory tree — every entry's
// mode, size, modification time and content hash — so that tests can show
// a tool that must only read left every file as it was.
package filesnap
