package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names the file a run's CPU profile goes to. It is an
// environment variable, not a flag, so that it reaches every subcommand
// (sim, bench, sweep) without touching their flag sets or run folders: a
// profile is a measurement of the binary, not a result of the run.
const cpuProfileEnv = "PDHYBRID_CPUPROFILE"

// startCPUProfile starts the profile cpuProfileEnv asks for and returns the
// function that stops it; with the variable unset it does nothing. A file
// that cannot be created is reported on stderr and the run goes on.
func startCPUProfile(stderr io.Writer) (stop func()) {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "pdhybrid: %s=%s: %v (no profile written)\n", cpuProfileEnv, path, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "pdhybrid: %s=%s: %v\n", cpuProfileEnv, path, err)
		}
	}
}
