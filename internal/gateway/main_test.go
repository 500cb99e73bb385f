package gateway

import (
	"fmt"
	"os"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Every test runs with the dispatcher's lifecycle violations panicking
// (kvc/lifecycle.go): the gateway's executor must feed outcomes in order.
func TestMain(m *testing.M) {
	kvc.SetStrict(true)
	// GATEWAY_RELAY=direct runs the package's tests with every gateway
	// on the direct relay (relaydirect.go).
	forceRelayDirect = os.Getenv("GATEWAY_RELAY") == "direct"
	code := m.Run()
	if forceRelayDirect {
		fmt.Printf("direct relay: %d streams taken\n", directTaken.Load())
	}
	os.Exit(code)
}
