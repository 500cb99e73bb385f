package main

import (
	"context"
	"errors"
)

func runTraceSample(ctx context.Context, e *env, args []string) error {
	return errors.New("trace_sample: under construction")
}
