package main

import (
	"context"
	"errors"
)

func runTraceStats(ctx context.Context, e *env, args []string) error {
	return errors.New("trace_stats: under construction")
}
