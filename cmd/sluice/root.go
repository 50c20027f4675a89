package main

import "github.com/spf13/cobra"

// subcommands holds the constructor of every subcommand. Each command's file
// appends its constructor in init, so that files can be added to the package
// without editing the root, and every newRootCmd builds a fresh tree (tests
// run commands side by side and must not share flag state).
var subcommands []func() *cobra.Command

// newRootCmd returns the sluice command with all subcommands.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Stateful stream processing on Kafka with exactly-once results",
		// main prints the error once; usage after a runtime error
		// buries it.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentFlags().String(configFlag, "", "read configuration from the YAML `FILE` (keys as in Kafka Streams, e.g. application.id)")
	for _, sub := range subcommands {
		root.AddCommand(sub())
	}
	return root
}
