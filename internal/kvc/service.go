package kvc

// Role names a worker pool of the dispatcher.
type Role int

const (
	RolePrefill Role = iota
	RoleDecode       // decoders, or the colocated pool of MechColo
)

// SetDown takes a worker out of service or puts it back — what the
// gateway's active health checks decide. A decoder out of service is asked
// for nothing (no admission RPC, no direct append, no seed) while another
// will do; a prefill worker out of service gets no prefill.
func (x *Dispatcher) SetDown(role Role, w int, down bool) {
	r := x.d
	if role == RolePrefill {
		r = x.p
	}
	if r == nil || w < 0 || w >= len(r.names) {
		return
	}
	r.SetDown(w, down)
}

// Down reports whether a worker is out of service.
func (x *Dispatcher) Down(role Role, w int) bool {
	r := x.d
	if role == RolePrefill {
		r = x.p
	}
	return r != nil && w >= 0 && w < len(r.names) && r.Down(w)
}
