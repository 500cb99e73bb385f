package main

import (
	"context"
	"errors"
)

func runReport(ctx context.Context, e *env, args []string) error {
	return errors.New("report: under construction")
}
