// Command sluice runs sluice's built-in examples, prints their topologies and
// runs the embedded development broker. See `sluice help`.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		// The root silences cobra's own error printing, so this is the
		// only place an error reaches the user.
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}
