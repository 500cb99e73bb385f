package kvc

import "fmt"

// A request's path: the chain of decisions that led to its execution mode,
// kept for the run's records unless nobody reads them (SetQuiet).

// SetQuiet stops the dispatcher writing each request's decision path
// (Dispatch.Path stays empty). A simulation with no sink reads no path,
// and formatting them was a tenth of a KVC simulation's time.
func (x *Dispatcher) SetQuiet() { x.noPaths = true }

// setWhy records the first reason the request did not go direct; the path
// keeps it with the others that followed.
func (t *Dispatch) setWhy(w string) {
	if t.why == "" {
		t.why = w
		if t.paths() {
			t.note("why: %s", w)
		}
	}
}

// suffixOnce records the fallback's refinement of the mode, the first one.
func (t *Dispatch) suffixOnce(s string) {
	if t.suffix == "" {
		t.suffix = s
	}
}

// note adds a step to the request's path. Its arguments are boxed before
// the call whether or not the path is kept, so the notes of every request
// ask paths() first.
func (t *Dispatch) note(format string, args ...any) {
	if t.x.noPaths {
		return
	}
	t.path = append(t.path, fmt.Sprintf(format, args...))
}

// paths says whether the request's path is kept (not SetQuiet).
func (t *Dispatch) paths() bool { return !t.x.noPaths }

// verdict names a placement's outcome for a note.
func verdict(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}
