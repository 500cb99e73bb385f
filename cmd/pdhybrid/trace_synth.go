package main

import (
	"context"
	"errors"
)

func runTraceSynth(ctx context.Context, e *env, args []string) error {
	return errors.New("trace_synth: under construction")
}
