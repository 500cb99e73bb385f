package main

import (
	"context"
	"errors"
)

func runSim(ctx context.Context, e *env, args []string) error {
	return errors.New("sim: under construction")
}
