package gateway

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// plainReasonRE is the pattern plainReason stands for.
var plainReasonRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

func TestPlainReasonIsTheRegexp(t *testing.T) {
	cases := []string{"", "a", "no-space", "session_cap", "A", "no space", "x\n", "\nx",
		"é", "\xff", "a.b", "a:b", strings.Repeat("a", 64), strings.Repeat("a", 65),
		strings.Repeat("z9_-", 16), strings.Repeat("z9_-", 16) + "x", "`", "{", "/", "@", "[", "0", "9"}
	for _, c := range cases {
		if got, want := plainReason(c), plainReasonRE.MatchString(c); got != want {
			t.Errorf("plainReason(%q) = %v, the regexp says %v", c, got, want)
		}
	}
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte("az09_-AZ:. \n\x00\x7f\x80\xffé/`{@[")
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.Intn(70))
		for j := range b {
			if rng.Intn(8) == 0 {
				b[j] = alphabet[rng.Intn(len(alphabet))]
			} else {
				b[j] = "abcxyz0189_-"[rng.Intn(12)]
			}
		}
		if got, want := plainReason(string(b)), plainReasonRE.MatchString(string(b)); got != want {
			t.Fatalf("plainReason(%q) = %v, the regexp says %v", b, got, want)
		}
	}
}

func FuzzPlainReasonIsTheRegexp(f *testing.F) {
	for _, s := range []string{"", "no-space", "A", strings.Repeat("a", 65), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := plainReason(s), plainReasonRE.MatchString(s); got != want {
			t.Fatalf("plainReason(%q) = %v, the regexp says %v", s, got, want)
		}
	})
}
