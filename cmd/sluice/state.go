package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/state"
)

func init() { subcommands = append(subcommands, newStateCmd) }

// newStateCmd is `sluice state`: the state tools over a stopped instance's
// state directory, read-only (package state).
func newStateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Read a stopped instance's local state: list stores, get a key, dump a store",
		Long: `The state tools read a state directory without writing to it: DIR is the
state.dir root (every application under it) or one application's directory,
<state.dir>/<application.id>. A directory a running instance holds is refused.

Stores are decoded through a built-in example's serdes when the tool knows the
example: --example NAME, or else an application id of the form sluice-NAME (the
default id of ` + "`sluice run NAME`" + `). Otherwise keys and values are raw bytes,
printed base64.`,
	}
	cmd.AddCommand(newStateLsCmd(), newStateGetCmd(), newStateDumpCmd())
	return cmd
}

// openState opens dir with the topology of the example it belongs to, if
// known, and returns that example's name ("" if none).
func openState(dir, example string) (*state.Reader, string, error) {
	if example == "" {
		apps, err := state.Applications(dir)
		if err != nil {
			return nil, "", err
		}
		if len(apps) == 1 {
			if name, ok := strings.CutPrefix(apps[0], "sluice-"); ok {
				if _, err := examples.Get(name); err == nil {
					example = name
				}
			}
		}
	}
	var opts []state.Option
	if example != "" {
		e, err := examples.Get(example)
		if err != nil {
			return nil, "", fmt.Errorf("state: %w", err)
		}
		opts = append(opts, state.WithTopology(e.Build(e.Defaults(nil))))
	}
	r, err := state.Open(dir, opts...)
	return r, example, err
}

func addExampleFlag(cmd *cobra.Command, example *string) {
	cmd.Flags().StringVar(example, "example", "", "decode through this built-in example's serdes (default: the example named by an application id sluice-NAME)")
}

// withState checks --format, opens dir (openState) and runs fn on it.
func withState(dir, example, format string, fn func(*state.Reader) error) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("state: --format %q: want text or json", format)
	}
	r, _, err := openState(dir, example)
	if err != nil {
		return err
	}
	defer r.Close()
	return fn(r)
}

func newStateLsCmd() *cobra.Command {
	var example, format string
	cmd := &cobra.Command{
		Use:   "ls DIR",
		Short: "List the stores of a state directory: task, partition, layout, records, size, changelog offset",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withState(args[0], example, format, func(r *state.Reader) error { return printStores(cmd.OutOrStdout(), r, format) })
		},
	}
	addExampleFlag(cmd, &example)
	cmd.Flags().StringVar(&format, "format", "text", "text or json (one object a line)")
	return cmd
}

func printStores(out io.Writer, r *state.Reader, format string) error {
	infos, err := r.Stores()
	if err != nil {
		return err
	}
	if format == "json" {
		enc := json.NewEncoder(out)
		for _, s := range infos {
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APPLICATION\tSTORE\tTASK\tPARTITION\tLAYOUT\tRECORDS\tBYTES\tCHANGELOG OFFSET")
	for _, s := range infos {
		off := "-"
		if s.ChangelogOffset >= 0 {
			off = fmt.Sprint(s.ChangelogOffset)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", s.Application, s.Store, s.Task, s.Partition, s.Layout, s.Records, s.SizeBytes, off)
	}
	return tw.Flush()
}

func newStateGetCmd() *cobra.Command {
	var example, format string
	var keyBase64 bool
	cmd := &cobra.Command{
		Use:   "get DIR STORE KEY",
		Short: "Print the value (or the windows) of one key of a store",
		Long: `KEY is text, encoded through the store's key serde when the example is known
(the text itself for string and bytes keys, JSON for others), else taken as its
bytes; --key-base64 gives the key's encoding itself, for any bytes.`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withState(args[0], example, format, func(r *state.Reader) error {
				var kb []byte
				var err error
				if keyBase64 {
					if kb, err = base64.StdEncoding.DecodeString(args[2]); err != nil {
						return fmt.Errorf("state: --key-base64: %w", err)
					}
				} else if kb, err = r.KeyFromText(args[1], args[2]); err != nil {
					return err
				}
				entries, err := r.Lookup(args[1], kb)
				if err != nil {
					return err
				}
				for _, e := range entries {
					if err := printEntry(cmd.OutOrStdout(), format, e); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	addExampleFlag(cmd, &example)
	cmd.Flags().BoolVar(&keyBase64, "key-base64", false, "KEY is the base64 of the key's encoded bytes")
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	return cmd
}

func newStateDumpCmd() *cobra.Command {
	var example, format string
	var limit int
	cmd := &cobra.Command{
		Use:   "dump DIR STORE",
		Short: "Print every entry of a store, decoded where the example is known",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return fmt.Errorf("state: --limit %d: want 0 (no limit) or more", limit)
			}
			return withState(args[0], example, format, func(r *state.Reader) error {
				n := 0
				errLimit := errors.New("limit reached")
				err := r.Entries(args[1], func(e state.Entry) error {
					if limit > 0 && n >= limit {
						return errLimit
					}
					n++
					return printEntry(cmd.OutOrStdout(), format, e)
				})
				if errors.Is(err, errLimit) {
					return nil
				}
				return err
			})
		},
	}
	addExampleFlag(cmd, &example)
	cmd.Flags().StringVar(&format, "format", "text", "text (one entry a line, tab-separated) or json (one object a line)")
	cmd.Flags().IntVar(&limit, "limit", 0, "print at most N entries (0: all)")
	return cmd
}

// entryJSON is a line of `--format json`: key and value decoded where the
// serdes are known, base64 of the stored bytes otherwise.
type entryJSON struct {
	Task        string        `json:"task"`
	Partition   int32         `json:"partition"`
	Key         any           `json:"key,omitempty"`
	Value       any           `json:"value,omitempty"`
	Window      *state.Bounds `json:"window,omitempty"`
	KeyBase64   string        `json:"key_base64"`
	ValueBase64 *string       `json:"value_base64,omitempty"`
	// Error says why an entry of a store with known serdes is raw.
	Error string `json:"error,omitempty"`
}

func printEntry(w io.Writer, format string, e state.Entry) error {
	if format == "json" {
		j := entryJSON{Task: e.Raw.Task, Partition: e.Raw.Partition, Window: e.Window, KeyBase64: base64.StdEncoding.EncodeToString(e.Raw.Key)}
		if e.Decoded {
			j.Key, j.Value = jsonable(e.Key), jsonable(e.Value)
		}
		if e.DecodeErr != nil {
			j.Error = e.DecodeErr.Error()
		}
		if e.Window == nil {
			v := base64.StdEncoding.EncodeToString(e.Raw.Value)
			j.ValueBase64 = &v
		}
		b, err := json.Marshal(j)
		if err != nil {
			return fmt.Errorf("state: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var k, v string
	if e.Decoded {
		k, v = text(e.Key), text(e.Value)
	} else {
		k, v = base64.StdEncoding.EncodeToString(e.Raw.Key), base64.StdEncoding.EncodeToString(e.Raw.Value)
	}
	if e.Window != nil {
		_, err := fmt.Fprintf(w, "%s\t%s\t[%d,%d)\t%s\n", e.Raw.Task, k, e.Window.Start, e.Window.End, v)
		return err
	}
	if e.DecodeErr != nil {
		v += "\t(raw: " + e.DecodeErr.Error() + ")"
	}
	_, err := fmt.Fprintf(w, "%s\t%s\t%s\n", e.Raw.Task, k, v)
	return err
}

// jsonable: a []byte key is shown as text when it is UTF-8 (json would
// base64 it), and as nil when it is not (key_base64 has it).
func jsonable(x any) any {
	if b, ok := x.([]byte); ok {
		if utf8.Valid(b) {
			return string(b)
		}
		return nil
	}
	return x
}

func text(x any) string {
	switch x := x.(type) {
	case string:
		return x
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return base64.StdEncoding.EncodeToString(x)
	}
	if b, err := json.Marshal(x); err == nil {
		return string(b)
	}
	return fmt.Sprint(x)
}
