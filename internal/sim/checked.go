package sim

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// checkedSource validates requests as they stream in, with the rules of
// `pdhybrid trace validate` (trace.Checker): a wrong hash-id count would
// push KV accounting past the pool, a child listed before its parent would
// run concurrently with it, and a duplicate chat id would run twice. The
// first bad request stops the run with its located error.
type checkedSource struct {
	src  Source
	chk  *trace.Checker
	n    int
	file string
	ends SessionEnds // the source's, when it knows sessions' last turns (sessionend.go)
}

type locatedSource interface {
	File() string
	Line() int
}

func newCheckedSource(src Source) *checkedSource {
	c := &checkedSource{src: src, chk: trace.NewChecker(src.Header().BlockSize), file: "built-in workload", ends: sessionEnds(src)}
	if l, ok := src.(locatedSource); ok {
		c.file = l.File()
	}
	return c
}

func (c *checkedSource) Header() trace.Header { return c.src.Header() }

func (c *checkedSource) Next(r *trace.Request) error {
	if err := c.src.Next(r); err != nil {
		return err
	}
	c.n++
	line := c.n // a generator's requests are numbered from 1
	if l, ok := c.src.(locatedSource); ok {
		line = l.Line()
	}
	if errs := c.chk.Check(r, line); len(errs) > 0 {
		e := *errs[0]
		e.File = c.file
		if len(errs) > 1 {
			e.Msg += fmt.Sprintf(" (and %d more problems on this line; `pdhybrid trace validate` lists them)", len(errs)-1)
		}
		return &e
	}
	c.chk.Accept(r, line)
	return nil
}
