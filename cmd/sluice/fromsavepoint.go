package main

import (
	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/processor"
)

// savepointFlags are sluice run's --from-savepoint, --allow-dropped-state
// and --allow-other-app: a start from a savepoint (processor.FromSavepoint).
type savepointFlags struct {
	dir                         string
	allowDropped, allowOtherApp bool
}

func (s *savepointFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.dir, "from-savepoint", "", "start the application from the savepoint in this directory (sluice savepoint create): its stores and input offsets; the application must have no state (a new --app-id, or one reset with sluice reset). Every replica may be given it: the first seeds, the others join")
	cmd.Flags().BoolVar(&s.allowDropped, "allow-dropped-state", false, "with --from-savepoint: discard the savepoint's stores that the topology no longer has (default: refuse the start)")
	cmd.Flags().BoolVar(&s.allowOtherApp, "allow-other-app", false, "with --from-savepoint: accept a savepoint of another application id, forking it into this one (default: refuse it)")
}

func (s *savepointFlags) opts() []processor.Opt {
	if s.dir == "" {
		return nil
	}
	opts := []processor.Opt{processor.FromSavepoint(s.dir)}
	if s.allowDropped {
		opts = append(opts, processor.AllowDroppedState())
	}
	if s.allowOtherApp {
		opts = append(opts, processor.AllowOtherApp())
	}
	return opts
}
