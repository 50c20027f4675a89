// Package lint holds the repository's style and safety rules written as Go
// tests (after Pebble's internal/lint): each test parses the repository's
// Go files and reports the code that breaks its rule, and each rule has a
// negative control on a small snippet that breaks it.
package lint
