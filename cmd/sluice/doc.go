// Command sluice is the command-line tool of sluice: `sluice broker` runs the
// embedded Kafka-protocol broker, `sluice run <example>` runs one instance of
// a built-in example, `sluice topology <example>` prints its topology, and
// `sluice demo` is the one-command tour. Settings come from flags, SLUICE_*
// environment variables and a YAML --config file, in that order of precedence.
package main
