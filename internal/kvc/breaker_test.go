package kvc

import "testing"

// The breaker opens after Failures failures within the window, holds
// traffic back for the cooldown, lets one probe through, and closes on its
// success (or waits again on its failure).
func TestBreaker(t *testing.T) {
	b := breaker{cfg: BreakerConfig{Failures: 2, WindowS: 10, CooldownS: 5}}
	b.failure(0, false)
	b.failure(11, false) // the first fell out of the window
	if !b.allows(11) {
		t.Fatal("opened on failures more than a window apart")
	}
	b.failure(12, false)
	if b.allows(12) || b.allows(16.9) {
		t.Fatal("open breaker let traffic through during its cooldown")
	}
	if !b.allows(17) {
		t.Fatal("no probe after the cooldown")
	}
	b.sent(17)
	if b.allows(17.5) {
		t.Fatal("a second request went through while the probe is out")
	}
	b.failure(18, true) // the probe failed: wait again
	if b.allows(22) || !b.allows(23) {
		t.Fatal("a failed probe should restart the cooldown")
	}
	b.sent(23)
	b.success()
	if !b.allows(23.1) {
		t.Fatal("a successful probe should close the breaker")
	}
}
