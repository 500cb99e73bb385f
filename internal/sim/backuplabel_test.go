package sim

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/synth"
)

// With capacity-backup the prefill worker reports the sessions it keeps to
// the control plane, so a reseed after an eviction of a session P backs is
// labelled -after-prefill-backed-eviction; with release-after-transfer none is.
func TestPrefillBackedEvictionLabel(t *testing.T) {
	p := profile(t)
	kvb := p.Model.KVBytesPerToken()
	// One decoder with room for two of the three sessions: every session is
	// evicted in turn, and P (a backup cap of 4) backs all three.
	frac := float64(p.Model.WeightBytes+p.Hardware.WorkspaceBytes+44000*kvb) / float64(p.Hardware.HBMBytes)
	count := func(backup string) (backed, evicted int) {
		c := synth.DefaultSmallAppend()
		c.Sessions, c.Turns, c.InitialTokens, c.AppendTokens, c.GapS = 3, 10, 16000, 1000, 5
		g, err := synth.NewSmallAppend(c)
		if err != nil {
			t.Fatal(err)
		}
		cfg := kvcConfig(t)
		cfg.Decode, cfg.DecodeMemFraction = 1, frac
		cfg.KVC.PrefillBackup = backup
		sink := &memSink{}
		if _, err := runSource(t, cfg, g, sink); err != nil {
			t.Fatal(err)
		}
		for _, r := range sink.recs {
			switch {
			case strings.HasSuffix(r.ExecutionMode, "-after-prefill-backed-eviction"):
				backed++
			case strings.HasSuffix(r.ExecutionMode, "-after-eviction"):
				evicted++
			}
		}
		return backed, evicted
	}
	if backed, evicted := count("release-after-transfer"); backed != 0 || evicted == 0 {
		t.Fatalf("release-after-transfer: %d prefill-backed and %d plain reseeds after eviction; want none and some", backed, evicted)
	}
	if backed, _ := count("capacity-backup"); backed == 0 {
		t.Fatal("capacity-backup: no reseed after an eviction of a session P backs")
	}
}
