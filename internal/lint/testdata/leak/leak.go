// Package leak is the negative control of the public-API rule
// (publicapi_test.go): each exported declaration below shows an internal
// name the way go doc would, except those marked hidden. It is never
// built.
package leak

import (
	"github.com/sluice-streams/sluice/internal/exec"
	ex "github.com/sluice-streams/sluice/internal/exec"
	. "github.com/sluice-streams/sluice/internal/layout"
)

type Option func(*exec.Store)

type Alias = exec.Header

type Class = ex.ErrorClass

var ErrX = exec.ErrInvalidTimestamp

const hiddenConst = exec.Deserialization

func Handle(h exec.ErrorHandler) {}

func Run() *exec.Plan { return nil }

func hidden(p *exec.Plan) {}

func Body() { _ = exec.Plan{} } // hidden: bodies are not shown

type T struct {
	hidden *exec.Plan
	Shown  int
}

func (T) Plan() *exec.Plan { return nil }

func (t T) unexported() *exec.Plan { return nil }

type unexportedType struct{}

func (unexportedType) Exported() *exec.Plan { return nil }

type Config struct {
	Field  *exec.Store
	hidden *exec.Node
}

type Wrapper struct {
	*exec.Store // embedded: shown under its type's name
}

type Context interface {
	Open(ctx interface{ execContext() exec.Context })
	hidden() exec.Context
}

type Generic[T interface{ *exec.Node }] struct{}

var Opts = func(n *exec.Node) {}
