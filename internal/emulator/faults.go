package emulator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// Faults are failure injections, for testing what sits in front of the
// worker. The zero value injects nothing.
type Faults struct {
	// ErrorRate is the fraction of /generate requests answered 500 at once,
	// drawn from a generator seeded with Seed (so a run is reproducible).
	ErrorRate float64
	// StallS is model time added before each /generate is taken.
	StallS float64
	// CrashAfter: the worker serves this many /generate requests; the next
	// one crashes it (Config.Crash: the process exits), cutting every
	// stream in flight. 0: never.
	CrashAfter int
	// SlowTransfer divides the prefill worker's link bandwidth (≥ 1).
	SlowTransfer float64
	// RefuseAdmissions makes every admission reply can_admit false with
	// reason "fault-injected".
	RefuseAdmissions bool
	Seed             uint64
}

func (f *Faults) check() error {
	switch {
	case !(f.ErrorRate >= 0 && f.ErrorRate <= 1):
		return fmt.Errorf("emulator: fault error rate %v, want a fraction in [0, 1]", f.ErrorRate)
	case !(f.StallS >= 0) || math.IsInf(f.StallS, 0):
		return fmt.Errorf("emulator: fault stall %v s, want ≥ 0", f.StallS)
	case f.CrashAfter < 0:
		return fmt.Errorf("emulator: fault crash-after %d, want ≥ 0", f.CrashAfter)
	case f.SlowTransfer != 0 && !(f.SlowTransfer >= 1) || math.IsInf(f.SlowTransfer, 0):
		return fmt.Errorf("emulator: fault slow-transfer factor %v, want ≥ 1", f.SlowTransfer)
	}
	return nil
}

type faultAction uint8

const (
	faultNone faultAction = iota
	faultError
	faultCrash
)

type faultState struct {
	f   Faults
	mu  sync.Mutex
	rng *rand.Rand
	n   int
}

func newFaultState(f Faults) *faultState {
	return &faultState{f: f, rng: rand.New(rand.NewPCG(f.Seed, 0x5eed))}
}

// onGenerate decides what happens to the next /generate.
func (fs *faultState) onGenerate() faultAction {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.n++
	if fs.f.CrashAfter > 0 && fs.n > fs.f.CrashAfter {
		return faultCrash
	}
	if fs.f.ErrorRate > 0 && fs.rng.Float64() < fs.f.ErrorRate {
		return faultError
	}
	return faultNone
}
