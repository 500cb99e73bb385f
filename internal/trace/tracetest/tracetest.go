// Package tracetest holds helpers for the trace packages' tests: locating the
// shared real traces (which live outside the repository) and generating small
// synthetic canonical traces.
package tracetest

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// SharedTraces returns ../shared/traces/<sub> relative to the repository root
// (the directory holding go.mod), or skips the test when it is absent, as it
// is on a fresh clone.
func SharedTraces(tb testing.TB, sub string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Skip("no go.mod above the test directory; cannot locate ../shared/traces")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "traces", sub)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("shared trace %s not present (a fresh clone has no ../shared): skipping", p)
	}
	return p
}

// Sessions generates a small agentic trace: n sessions of turns turns each,
// every turn resending the previous prompt plus an append, sessions staggered
// by 1 s, in global timestamp order. Deterministic for a given seed.
func Sessions(seed uint64, n, turns, blockSize int) []trace.Request {
	rng := rand.New(rand.NewPCG(seed, 1))
	type sess struct {
		ids    []uint64
		in     int
		t      float64
		last   int64
		turn   int
		nextID uint64
	}
	ss := make([]sess, n)
	for i := range ss {
		ss[i] = sess{t: float64(i), last: -1, nextID: uint64(i+1) << 32}
	}
	var out []trace.Request
	var chat int64
	for {
		// Next session to release: earliest time, ties by index.
		best := -1
		for i := range ss {
			if ss[i].turn < turns && (best < 0 || ss[i].t < ss[best].t) {
				best = i
			}
		}
		if best < 0 {
			return out
		}
		s := &ss[best]
		s.in += 100 + rng.IntN(3*blockSize)
		full := s.in / blockSize
		for len(s.ids) < full {
			s.ids = append(s.ids, s.nextID)
			s.nextID++
		}
		ids := append([]uint64(nil), s.ids...)
		if s.in%blockSize != 0 {
			ids = append(ids, 1<<63|uint64(chat))
		}
		s.turn++
		r := trace.Request{
			SessionID: "s" + string(rune('a'+best%26)) + itoa(best), ChatID: chat, ParentChatID: s.last,
			Turn: s.turn, Timestamp: s.t, InputLength: s.in, OutputLength: 1 + rng.IntN(500),
			Type: "text", HashIDs: ids,
		}
		if s.turn > 1 {
			v := float64(rng.IntN(5000)) / 1000
			r.ThinkTimeS = &v
		}
		out = append(out, r)
		s.last = chat
		chat++
		s.t += 0.5 + float64(rng.IntN(4000))/1000
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
