package main

import (
	"context"
	"errors"
)

func runTraceValidate(ctx context.Context, e *env, args []string) error {
	return errors.New("trace_validate: under construction")
}
