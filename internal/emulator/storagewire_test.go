package emulator

import (
	"encoding/json"
	"strings"
	"testing"
)

// The admission reply's storage_tokens is on the wire only when a storage
// answer has some: a worker without a storage tier answers byte for byte
// as before.
func TestAdmitResponseStorageTokensOnTheWire(t *testing.T) {
	for _, c := range []struct {
		rep  AdmitResponse
		want string
		has  bool
	}{
		{AdmitResponse{Mode: "seed", Tier: "none"}, "", false},
		{AdmitResponse{CanAdmit: true, Mode: "direct_append", CachedTokens: 1280, Tier: "storage", StorageTokens: 1280}, `"tier":"storage","host_tokens":0,"storage_tokens":1280}`, true},
	} {
		b, err := json.Marshal(c.rep)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(b), "storage_tokens"); got != c.has || c.has && !strings.HasSuffix(string(b), c.want) {
			t.Fatalf("%+v encodes as %s; want storage_tokens %v (%s)", c.rep, b, c.has, c.want)
		}
	}
}
