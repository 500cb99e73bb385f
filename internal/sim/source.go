package sim

import (
	"io"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// SliceSource serves requests from memory (tests, small generated traces).
type SliceSource struct {
	H    trace.Header
	Reqs []trace.Request
	i    int
}

func (s *SliceSource) Header() trace.Header { return s.H }

func (s *SliceSource) Next(r *trace.Request) error {
	if s.i >= len(s.Reqs) {
		return io.EOF
	}
	*r = s.Reqs[s.i]
	s.i++
	return nil
}
