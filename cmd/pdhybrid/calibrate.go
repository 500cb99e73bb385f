package main

import (
	"context"
	"errors"
)

func runCalibrate(ctx context.Context, e *env, args []string) error {
	return errors.New("calibrate: under construction")
}
