package gateway

import (
	"os"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Every test runs with the dispatcher's lifecycle violations panicking
// (kvc/lifecycle.go): the gateway's executor must feed outcomes in order.
func TestMain(m *testing.M) {
	kvc.SetStrict(true)
	os.Exit(m.Run())
}
