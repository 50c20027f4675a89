// Command sluice is the command-line tool of sluice: `sluice broker` runs the
// embedded Kafka-protocol broker, `sluice run <example>` runs one instance of
// a built-in example (with --http: metrics, health, task status and
// interactive queries), `sluice topology <example>` prints its topology,
// `sluice demo` is the one-command tour, `sluice bench` measures the jobs
// against a raw franz-go loop, `sluice config` prints the effective
// configuration, `sluice reset` prepares an application to reprocess its
// input, `sluice gen billing` feeds the billing example, and `sluice
// healthcheck` is the container healthcheck. Settings come from flags,
// SLUICE_* environment variables and a YAML --config file, in that order of
// precedence.
//
// Secure clusters are reached with the Java client's keys security.protocol,
// sasl.mechanism, sasl.username, sasl.password (environment or file only,
// never a flag), sasl.password.file, ssl.ca.location,
// ssl.certificate.location and ssl.key.location (security.go); invalid
// combinations fail the start with the key named, and no message, log line
// or `sluice config` output shows the password.
package main
