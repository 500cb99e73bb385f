package main

import (
	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// slideFlags give the live router's belief of the decoders' caches their
// sliding-window pool, as the simulator gives its router from the workers'
// profile (kvc/index.go: the index runs SGLang's SWA radix cache rule on
// its record, so an overlap is cut where a decoder's match would be). The
// window comes from serve's --model-config; the pool from the decoders'
// own flags of the same names, which the gateway cannot read from them.
type slideFlags struct {
	swaRatio   float64
	poolTokens int64
}

func (f *slideFlags) register(fs *pflag.FlagSet) {
	fs.Float64Var(&f.swaRatio, "swa-full-tokens-ratio", 0.8, "with --model-config and --max-total-tokens: the decoders' --swa-full-tokens-ratio (SGLang's; worker and sim take it by this name), the `ratio` of the sliding layers' pool in tokens to the full layers' pool, in (0, 1], for the router's view of their caches on a model SGLang serves from two KV pools (GPT-OSS, Llama-4, Gemma-4, MiMo-V2, Step-3.5)")
	fs.Int64Var(&f.poolTokens, "max-total-tokens", 0, "with --model-config: the decoders' KV pool in `tokens` (SGLang --max-total-tokens; pdhybrid worker's flag of this name, its pool as it logs it): with the window of a two-pool model and --swa-full-tokens-ratio the router's belief of each decoder's cache keeps its sliding pool, as the simulator's does; 0 = no sliding view")
}

func (f *slideFlags) check(ck *checks, modelConfig string) {
	ck.num("swa-full-tokens-ratio", above(0).upTo(1).is("a ratio"))
	ck.num("max-total-tokens", between(1, 1<<40).is("a number of tokens").orZero("no sliding view"))
	ck.only("max-total-tokens", modelConfig != "", "with --model-config")
	ck.only("swa-full-tokens-ratio", modelConfig != "" && f.poolTokens > 0, "with --model-config and --max-total-tokens")
}

// view sets o's sliding view of the decoders for the model modelConfig
// names, in blocks of blockSize tokens: a hit needs the window's blocks
// before its end untombstoned, the sliding pool holds ratio × pool tokens,
// and the decoders keep each turn's output below its prompt. A model
// without SGLang's second pool, or no --max-total-tokens, gets none.
func (f *slideFlags) view(o *kvc.Options, modelConfig string, blockSize int) error {
	if modelConfig == "" || f.poolTokens <= 0 {
		return nil
	}
	a, err := model.LoadHF(modelConfig)
	if err != nil {
		return usagef("--model-config: %v", err)
	}
	if !a.SWAPool || a.SlidingWindow <= 0 {
		return nil
	}
	bs := max(blockSize, 1)
	o.SlidingRunBlocks = (a.SlidingWindow + bs - 1) / bs
	o.SlidingPoolBlocks = int(int64(f.swaRatio*float64(f.poolTokens)) / int64(bs))
	o.SlidingTails = true
	if o.SlidingPoolBlocks == 0 {
		o.SlidingRunBlocks = 0
	}
	return nil
}
