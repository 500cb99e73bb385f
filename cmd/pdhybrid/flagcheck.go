package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Every command checks its flags before it does any work: each numeric flag
// against its valid range (NaN and ±Inf are never valid), and each flag that
// only applies in some mode against the mode chosen. A problem is a usage
// error (exit status 2) naming the flag, the value given and what is valid.
// Nothing falls back to a default silently.
//
//	ck := newChecks(cmd)
//	ck.num("time-scale", between(0.001, 1000).unit("factor"))
//	ck.only("rate", arrival == "poisson", "with --arrival poisson")
//	if err := ck.err(); err != nil { return err }

// span is a valid range for a numeric flag.
type span struct {
	lo, hi         float64 // ±Inf for unbounded
	loOpen, hiOpen bool
	zero           string // non-empty: 0 is valid too, and means this
	what           string // what the number is, for the message ("a factor")
	integer        bool
}

// atLeast is [lo, ∞); above is (lo, ∞); between is [lo, hi].
func atLeast(lo float64) span     { return span{lo: lo, hi: math.Inf(1)} }
func above(lo float64) span       { return span{lo: lo, hi: math.Inf(1), loOpen: true} }
func between(lo, hi float64) span { return span{lo: lo, hi: hi} }

// upTo sets an upper bound; openTop makes it exclusive.
func (s span) upTo(hi float64) span     { s.hi = hi; return s }
func (s span) openTop() span            { s.hiOpen = true; return s }
func (s span) orZero(means string) span { s.zero = means; return s }
func (s span) is(what string) span      { s.what = what; return s }

func (s span) contains(v float64) bool {
	if s.zero != "" && v == 0 {
		return true
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	if v < s.lo || (s.loOpen && v == s.lo) || v > s.hi || (s.hiOpen && v == s.hi) {
		return false
	}
	return true
}

func fmtBound(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64) // 4194304, not 4.194304e+06
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// String says what is valid: "a factor in [0.001, 1000]", "0 (no limit) or
// a number of seconds > 0".
func (s span) String() string {
	what := s.what
	if what == "" {
		what = "a number"
		if s.integer {
			what = "a whole number"
		}
	}
	var rng string
	switch {
	case math.IsInf(s.hi, 1) && s.loOpen:
		rng = "> " + fmtBound(s.lo)
	case math.IsInf(s.hi, 1):
		rng = "≥ " + fmtBound(s.lo)
	default:
		l, r := "[", "]"
		if s.loOpen {
			l = "("
		}
		if s.hiOpen {
			r = ")"
		}
		rng = "in " + l + fmtBound(s.lo) + ", " + fmtBound(s.hi) + r
	}
	out := what + " " + rng
	if s.zero != "" {
		out = "0 (" + s.zero + ") or " + out
	}
	return out
}

// checks collects the first problem with a command's flags.
type checks struct {
	fs    *pflag.FlagSet
	first error
	// tolerate names flags whose not applying is noted in moot (flag →
	// when it would apply) instead of failing: sweep's knobs, so a knob
	// that does not apply to a cell's mechanism is dropped from that cell.
	tolerate map[string]bool
	moot     map[string]string
}

func newChecks(c *cobra.Command) *checks { return &checks{fs: c.Flags()} }

// set reports whether the user gave the flag.
func (k *checks) set(name string) bool { return k.fs.Changed(name) }

// value is the flag's value as the user would write it.
func (k *checks) value(name string) string {
	f := k.fs.Lookup(name)
	if f == nil {
		panic("checks: no flag --" + name)
	}
	return f.Value.String()
}

// fail records a problem unless one is recorded already. A message about
// a flag whose value came from a --config file ("--name value: ...")
// starts with that file and line, since the command line never said it.
func (k *checks) fail(format string, a ...any) {
	if k.first == nil {
		msg := fmt.Sprintf(format, a...)
		if o := configOrigin(k.fs, msg); o != "" {
			msg = "--config " + o + ": " + msg
		}
		k.first = usageError{msg}
	}
}

// configOrigin is "file:line" for a message about a flag that a --config
// file set, else "".
func configOrigin(fs *pflag.FlagSet, msg string) string {
	rest, ok := strings.CutPrefix(msg, "--")
	if !ok {
		return ""
	}
	name := rest
	if i := strings.IndexAny(rest, " =:,"); i >= 0 {
		name = rest[:i]
	}
	if f := fs.Lookup(name); f != nil && len(f.Annotations[configOriginKey]) > 0 {
		return f.Annotations[configOriginKey][0]
	}
	return ""
}

// num checks a numeric flag (any int, uint or float type) against s.
func (k *checks) num(name string, s span) {
	f := k.fs.Lookup(name)
	if f == nil {
		panic("checks: no flag --" + name)
	}
	switch f.Value.Type() {
	case "int", "int64", "int32", "uint", "uint64", "uint32":
		s.integer = true
	}
	raw := f.Value.String()
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		k.fail("--%s %s: not a number; want %s", name, raw, s)
		return
	}
	if s.contains(v) {
		return
	}
	why := ""
	switch {
	case math.IsNaN(v):
		why = "not a number; "
	case math.IsInf(v, 0):
		why = "not finite; "
	}
	k.fail("--%s %s: %swant %s", name, raw, why, s)
}

// only rejects a flag the user gave when it does not apply: ok says whether
// it applies, when says in which mode it would ("with --arrival poisson").
func (k *checks) only(name string, ok bool, when string) {
	if ok || !k.set(name) {
		return
	}
	if k.tolerate[name] {
		if k.moot == nil {
			k.moot = map[string]string{}
		}
		k.moot[name] = when
		return
	}
	k.fail("--%s %s: applies only %s", name, k.value(name), when)
}

// oneOf checks a string flag against its choices.
func (k *checks) oneOf(name string, choices ...string) {
	v := k.value(name)
	for _, c := range choices {
		if v == c {
			return
		}
	}
	k.fail("--%s %q: want one of %s", name, v, strings.Join(choices, ", "))
}

// err is the first problem found, or nil.
func (k *checks) err() error { return k.first }
