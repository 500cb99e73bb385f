package engine

// windowS is what the sliding-window layers' reads add to a step over the
// current decode batch (model.Timing.DecodePerWindowCtxTokenS: each
// sequence's context up to the window), and what they add for each further
// step of a run: one token for every sequence still inside its window. It
// is taken at a run's first step and held for the run, as attnTailS is; a
// sequence that crosses its window during the run is charged its growth to
// the run's end, at most a run's length of tokens. 0, 0 without sliding
// layers.
func (w *Worker) windowS() (base, perStep float64) {
	s := w.tm.DecodePerWindowCtxTokenS
	if s == 0 || w.tm.SlidingWindow <= 0 || len(w.decoding) == 0 {
		return 0, 0
	}
	var read int64
	inside := 0
	for _, r := range w.decoding {
		c := r.Input + r.generated
		if c < w.tm.SlidingWindow {
			inside++
		}
		read += int64(w.tm.WindowedCtx(c))
	}
	return s * float64(read), s * float64(inside)
}
