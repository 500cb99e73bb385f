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
	// The package's tests run every gateway on the direct relay
	// (relaydirect.go), `serve`'s default; GATEWAY_RELAY=ordinary runs
	// them on the ordinary relay (relay.go), where a Config does not ask
	// for the direct one.
	forceRelayDirect = os.Getenv("GATEWAY_RELAY") != "ordinary"
	code := m.Run()
	if forceRelayDirect {
		fmt.Printf("direct relay: %d streams taken\n", directTaken.Load())
	}
	os.Exit(code)
}
