package sim

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Turn 2 of a session is ingested (its trace time) while turn 1 is between
// P's prefill-done (doneReading: readers = 0) and D's join, where the
// decoder's adoptPrompt reads turn 1's de.Blocks. Turn 2 is a compaction
// (new ids from block 0): adoptChain rewrites the chain in place, so D files
// turn 1's KV under turn 2's ids and turn 2 goes direct over KV it never had.
func TestRegressionChainRewrittenUnderDecoder(t *testing.T) {
	for ts := 0.05; ts < 0.2; ts += 0.004 {
		reqs := []trace.Request{
			{SessionID: "s", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: 6400, OutputLength: 4, HashIDs: blocks(1, 100)},
			{SessionID: "s", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: ts, InputLength: 7040, OutputLength: 4, HashIDs: blocks(2, 110)},
		}
		cfg := kvcConfig(t)
		cfg.IgnoreThink = true
		_, sink := run(t, cfg, reqs, 64)
		for _, r := range sink.recs {
			if r.ChatID == 2 && r.CachedTokens > 0 {
				t.Fatalf("turn 2 (ingested at %.3f s, no id in common with turn 1) found %d tokens cached on %s, mode %s",
					ts, r.CachedTokens, r.DecodeWorker, r.ExecutionMode)
			}
		}
	}
}

// A τ_reject of "never" must reach the dispatcher as never (the config's -1;
// the CLI's --migration-reject-threshold 0), not become the default 3.
func TestRegressionTauRejectZeroMeansNever(t *testing.T) {
	cfg := kvcConfig(t)
	cfg.KVC.TauReject = -1
	cfg.Defaults()
	if got := cfg.dispatchConfig().TauReject; got != 0 {
		t.Errorf("τ_reject 0 (never) became %d", got)
	}
}
