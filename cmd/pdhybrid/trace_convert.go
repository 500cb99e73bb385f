package main

import (
	"context"
	"errors"
)

func runTraceConvert(ctx context.Context, e *env, args []string) error {
	return errors.New("trace_convert: under construction")
}
