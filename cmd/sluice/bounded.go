package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/processor"
)

// boundedFlags are sluice run's --bounded and --until: a run that stops at
// the end of its input (processor.Bounded, processor.BoundedUntil).
type boundedFlags struct {
	on    bool
	until string
}

func (b *boundedFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&b.on, "bounded", false, "stop at the input's end as it is at start: process up to each input partition's last stable offset, fire every window, commit, print a summary and exit 0")
	cmd.Flags().StringVar(&b.until, "until", "", "with --bounded (implies it): end each input partition at its first record at or after this RFC 3339 time")
}

func (b *boundedFlags) opts() ([]processor.Opt, error) {
	if b.until != "" {
		t, err := time.Parse(time.RFC3339, b.until)
		if err != nil {
			return nil, fmt.Errorf("run: --until %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z: %w", b.until, err)
		}
		return []processor.Opt{processor.BoundedUntil(t)}, nil
	}
	if b.on {
		return []processor.Opt{processor.Bounded()}, nil
	}
	return nil, nil
}

// report prints the summary line of a bounded run that reached its end;
// one stopped by a signal before it prints nothing.
func (b *boundedFlags) report(w io.Writer, app *processor.App) {
	if !b.on && b.until == "" {
		return
	}
	s := app.Bounded()
	if !s.Finished {
		fmt.Fprintf(w, "bounded run stopped before its end: records %d, outputs %d, duration %s\n", s.Records, s.Outputs, s.Took.Round(time.Millisecond))
		return
	}
	fmt.Fprintf(w, "bounded run complete: records %d, outputs %d, duration %s\n", s.Records, s.Outputs, s.Took.Round(time.Millisecond))
}
