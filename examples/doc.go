// Package examples holds the built-in example jobs that `sluice run` and
// `sluice topology` know by name, each a plain function from its parameters
// to a topology:
//
//   - wordcount: words of text lines counted through a repartition topic;
//   - billing: bills deduplicated by id and summed per account, with bad
//     records dead-lettered.
package examples
