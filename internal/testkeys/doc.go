// Package testkeys generates adversarial keys for tests: keys whose
// encodings have every length from 0 to MaxLen bytes, and UUID strings,
// with varied bytes, so that code written for short friendly keys like
// "k1" meets the lengths where buffers grow, uvarint lengths take a
// second byte (128) and a key's bytes sort around a prefix's.
//
// Every function is deterministic: the same call returns the same keys.
package testkeys
