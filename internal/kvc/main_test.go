package kvc

import (
	"os"
	"testing"
)

// Every test runs with lifecycle violations panicking (lifecycle.go).
func TestMain(m *testing.M) {
	SetStrict(true)
	os.Exit(m.Run())
}
