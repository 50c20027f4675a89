package examples

import (
	"fmt"
	"sort"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/topology"
)

// Param is a string parameter of an example, exposed as a flag by the CLI.
type Param struct {
	Name, Default, Usage string
}

// Example is a built-in job.
type Example struct {
	Name    string
	Summary string
	Params  []Param
	// Inputs lists the parameters that name input topics (created by the
	// demo and tests).
	Inputs []string
	Build  func(params map[string]string) *topology.Topology
	// Options, if set, are the processor options the example runs with
	// (error policies, for instance).
	Options func(params map[string]string) []processor.Opt
}

var registry = map[string]Example{}

func register(e Example) { registry[e.Name] = e }

// Get returns the example called name.
func Get(name string) (Example, error) {
	e, ok := registry[name]
	if !ok {
		return Example{}, fmt.Errorf("examples: no example %q (have %v)", name, Names())
	}
	return e, nil
}

// Names lists the examples.
func Names() []string {
	var ns []string
	for n := range registry {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Defaults returns the parameters with their default values, overridden by
// given.
func (e Example) Defaults(given map[string]string) map[string]string {
	p := map[string]string{}
	for _, prm := range e.Params {
		p[prm.Name] = prm.Default
	}
	for k, v := range given {
		p[k] = v
	}
	return p
}
