package engine

import (
	"slices"
	"testing"
)

// capacity-backup keeps min(4, max(1, pool / (2 · prompt))) sessions:
// a pool of 1,000 and prompts of 200 give ⌊1000/400⌋ = 2. After seeds of
// a, b, c the two latest are kept (a dropped first); a new seed of a
// replaces nothing of its own (it has no backup left) and drops b: [c a].
// A second seed of a then replaces a's backup and keeps c: [c a]. A prompt
// of 600 gives max(1, ⌊1000/1200⌋ = 0) = 1: only the latest.
func TestPrefillBackupLimitByHand(t *testing.T) {
	w, err := New(Config{Name: "p", Role: RolePrefill, Profile: roundProfile("sglang"), BlockSize: 64, ChunkTokens: 4096,
		PoolTokens: 1000, PrefixCache: true, PrefillBackup: true})
	if err != nil {
		t.Fatal(err)
	}
	id := int64(0)
	seed := func(sess string, ns uint64, input int) {
		t.Helper()
		id++
		r := &Request{ID: id, Kind: PrefillOnly, Session: sess, KeepSession: true, Blocks: chain(ns, (input+63)/64), Input: input}
		if err := w.Submit(0, r); err != nil {
			t.Fatal(err)
		}
		drive(w, 0)
		if err := w.Release(0, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		sess  string
		ns    uint64
		input int
		want  []string
	}{
		{"a", 1, 200, []string{"a"}},
		{"b", 2, 200, []string{"a", "b"}},
		{"c", 3, 200, []string{"b", "c"}},
		{"a", 4, 200, []string{"c", "a"}},
		{"a", 5, 200, []string{"c", "a"}},
		{"d", 6, 600, []string{"d"}},
	} {
		seed(step.sess, step.ns, step.input)
		if got := w.Backups(); !slices.Equal(got, step.want) {
			t.Fatalf("after seeding %s with %d tokens: backups %v, want %v", step.sess, step.input, got, step.want)
		}
	}
}
