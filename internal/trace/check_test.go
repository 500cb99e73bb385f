package trace_test

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/tracetest"
)

func TestCheckerAcceptsGenerated(t *testing.T) {
	c := trace.NewChecker(64)
	for i, r := range tracetest.Sessions(5, 10, 10, 64) {
		if errs := c.Check(&r, i+1); len(errs) > 0 {
			t.Fatalf("line %d: %v", i+1, errs[0])
		}
		c.Accept(&r, i+1)
	}
	if ok, _, _ := c.Order(); !ok || c.Sessions() != 10 {
		t.Fatalf("ordered %v sessions %d", ok, c.Sessions())
	}
}

func TestCheckerProblems(t *testing.T) {
	root := trace.Request{SessionID: "a", ChatID: 1, ParentChatID: -1, Turn: 1, Timestamp: 10, InputLength: 5, HashIDs: []uint64{1, 2}}
	cases := []struct {
		name  string
		r     trace.Request
		field string
		msg   string
	}{
		{"duplicate chat", trace.Request{SessionID: "b", ChatID: 1, ParentChatID: -1, Turn: 1, Timestamp: 11}, "chat_id", "already used on line 1"},
		{"missing parent", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: 9, Turn: 2, Timestamp: 11}, "parent_chat_id", "does not appear"},
		{"bad parent", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: -3, Turn: 2, Timestamp: 11}, "parent_chat_id", "got -3"},
		{"turn not increasing", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: 1, Turn: 1, Timestamp: 11, InputLength: 5, HashIDs: []uint64{1, 2}}, "turn", "more than the parent's turn 1"},
		{"time backwards", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 9, InputLength: 5, HashIDs: []uint64{1, 2}}, "timestamp", "earlier than the parent's"},
		{"wrong session", trace.Request{SessionID: "z", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 11}, "session_id", `expected "a"`},
		{"hash length", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 11, InputLength: 9, HashIDs: []uint64{1}}, "hash_ids", "expected ceil(input_length 9 / block_size 4) = 3"},
		{"negative length", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 11, InputLength: -1, OutputLength: 0}, "input_length", "non-negative"},
		{"negative output", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 11, OutputLength: -4}, "output_length", "non-negative"},
		{"huge timestamp", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 1e308}, "timestamp", "in [0, 1e+09]"},
		{"huge think time", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 11, ThinkTimeS: ptr(1e12)}, "think_time_s", "in [0, 1e+09]"},
		{"root turn", trace.Request{SessionID: "c", ChatID: 2, ParentChatID: -1, Turn: 3, Timestamp: 11}, "turn", "expected 1"},
		{"second root", trace.Request{SessionID: "a", ChatID: 2, ParentChatID: -1, Turn: 1, Timestamp: 11}, "parent_chat_id", "already has a root"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chk := trace.NewChecker(4)
			r0 := root
			if errs := chk.Check(&r0, 1); len(errs) > 0 {
				t.Fatal(errs[0])
			}
			chk.Accept(&r0, 1)
			r := c.r
			errs := chk.Check(&r, 2)
			for _, e := range errs {
				if e.Line == 2 && e.Field == c.field && strings.Contains(e.Msg, c.msg) {
					return
				}
			}
			t.Fatalf("want %s: %q, got %v", c.field, c.msg, errs)
		})
	}
}

func ptr(v float64) *float64 { return &v }

func TestCheckerDerivesSessions(t *testing.T) {
	// Bailian style: no session ids, no turns.
	rs := []trace.Request{
		{ChatID: 10, ParentChatID: -1, Timestamp: 0},
		{ChatID: 11, ParentChatID: -1, Timestamp: 1},
		{ChatID: 12, ParentChatID: 10, Timestamp: 2},
		{ChatID: 13, ParentChatID: 12, Timestamp: 3},
	}
	c := trace.NewChecker(16)
	for i := range rs {
		if errs := c.Check(&rs[i], i+1); len(errs) > 0 {
			t.Fatal(errs[0])
		}
		c.Accept(&rs[i], i+1)
	}
	want := []struct {
		s    string
		turn int
	}{{"s10", 1}, {"s11", 1}, {"s10", 2}, {"s10", 3}}
	for i, w := range want {
		if rs[i].SessionID != w.s || rs[i].Turn != w.turn {
			t.Errorf("request %d: session %q turn %d, want %q %d", i, rs[i].SessionID, rs[i].Turn, w.s, w.turn)
		}
	}
}

func TestCheckerRejectedParent(t *testing.T) {
	c := trace.NewChecker(0)
	r := trace.Request{ChatID: 1, ParentChatID: -1, Timestamp: 0}
	c.Check(&r, 1)
	c.Reject(&r, 1)
	k := trace.Request{ChatID: 2, ParentChatID: 1, Timestamp: 1}
	errs := c.Check(&k, 2)
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "was dropped") {
		t.Fatalf("got %v", errs)
	}
}

func TestCheckerOrder(t *testing.T) {
	c := trace.NewChecker(0)
	for i, ts := range []float64{0, 5, 3, 7, 1} {
		r := trace.Request{SessionID: string(rune('a' + i)), ChatID: int64(i), ParentChatID: -1, Turn: 1, Timestamp: ts}
		c.Accept(&r, i+1)
	}
	ok, back, first := c.Order()
	if ok || back != 2 || first != 3 {
		t.Fatalf("ordered %v back %d first %d", ok, back, first)
	}
}

// TestCheckerForget: with TrackForgets, Forget drops a session's chat ids
// and its slot (reused by the next session), a later turn of it names its
// parent as unknown with the flag in the message, and Sessions still
// counts every session accepted.
func TestCheckerForget(t *testing.T) {
	c := trace.NewChecker(0)
	c.TrackForgets()
	accept := func(r trace.Request) []*trace.Error {
		errs := c.Check(&r, int(r.ChatID))
		if len(errs) == 0 {
			c.Accept(&r, int(r.ChatID))
		}
		return errs
	}
	for _, r := range []trace.Request{
		{SessionID: "a", ChatID: 1, ParentChatID: -1, Turn: 1},
		{SessionID: "a", ChatID: 2, ParentChatID: 1, Turn: 2},
		{SessionID: "b", ChatID: 3, ParentChatID: -1, Turn: 1},
	} {
		if errs := accept(r); len(errs) > 0 {
			t.Fatal(errs[0])
		}
	}
	c.Forget("a")
	if s, ch := c.Tracked(); s != 1 || ch != 1 {
		t.Fatalf("after forgetting a: %d sessions, %d chats tracked, want 1 and 1", s, ch)
	}
	errs := accept(trace.Request{SessionID: "a", ChatID: 4, ParentChatID: 2, Turn: 3})
	if len(errs) == 0 || errs[0].Field != "parent_chat_id" || !strings.Contains(errs[0].Msg, "--session-idle-forget") {
		t.Fatalf("a turn of a forgotten session: %v, want a parent_chat_id error naming the flag", errs)
	}
	if errs := accept(trace.Request{SessionID: "c", ChatID: 5, ParentChatID: -1, Turn: 1}); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	if errs := accept(trace.Request{SessionID: "c", ChatID: 6, ParentChatID: 5, Turn: 2}); len(errs) > 0 {
		t.Fatal(errs[0]) // c took a's slot: its own state, not a's
	}
	if s, _ := c.Tracked(); c.Sessions() != 3 || s != 2 {
		t.Fatalf("Sessions %d, %d tracked, want 3 accepted and 2 tracked", c.Sessions(), s)
	}
}

// TestCheckerLookupsStayFresh: the session Check found is reused by the
// Accept after it, but never across an Accept or a Forget in between: a
// second root of a session just accepted is refused, an Accept after its
// session was forgotten opens a new one, and an Accept with no Check
// before it (validators accept bad lines too) finds its own session.
func TestCheckerLookupsStayFresh(t *testing.T) {
	c := trace.NewChecker(0)
	c.TrackForgets()
	root := trace.Request{SessionID: "a", ChatID: 0, ParentChatID: -1, Turn: 1}
	if errs := c.Check(&root, 1); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	c.Accept(&root, 1)
	again := trace.Request{SessionID: "a", ChatID: 1, ParentChatID: -1, Turn: 1}
	if errs := c.Check(&again, 2); len(errs) != 1 || !strings.Contains(errs[0].Msg, "already has a root") {
		t.Fatalf("a second root of a: %v", errs)
	}
	turn := trace.Request{SessionID: "a", ChatID: 2, ParentChatID: 0, Turn: 2}
	if errs := c.Check(&turn, 3); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	c.Forget("a")
	c.Accept(&turn, 3)
	if s, _ := c.Tracked(); s != 1 || c.Sessions() != 2 {
		t.Fatalf("an Accept after its session was forgotten: %d tracked, %d accepted; want a new session (1, 2)", s, c.Sessions())
	}
	other := trace.Request{SessionID: "b", ChatID: 3, ParentChatID: -1, Turn: 1}
	c.Accept(&other, 4) // no Check: the memo still names a
	next := trace.Request{SessionID: "b", ChatID: 4, ParentChatID: 3, Turn: 1}
	if errs := c.Check(&next, 5); len(errs) == 0 || errs[0].Field != "turn" {
		t.Fatalf("turn 1 after b's root: %v, want a turn error", errs)
	}
	late := trace.Request{SessionID: "b", ChatID: 5, ParentChatID: -1, Turn: 1}
	if errs := c.Check(&late, 6); len(errs) != 1 || !strings.Contains(errs[0].Msg, `session "b" already has a root`) {
		t.Fatalf("a second root of b: %v", errs)
	}
}

// TestCheckerSessionSlot: every request of a session gets its session's
// slot, distinct sessions held at once get distinct slots, and a slot
// ForgetSlot frees goes to a later session (the simulator indexes its
// sessions by it). A freed or never-held slot is left alone.
func TestCheckerSessionSlot(t *testing.T) {
	c := trace.NewChecker(0)
	c.TrackForgets()
	accept := func(r trace.Request) int32 {
		t.Helper()
		if errs := c.Check(&r, int(r.ChatID)); len(errs) > 0 {
			t.Fatal(errs[0])
		}
		c.Accept(&r, int(r.ChatID))
		return c.SessionSlot()
	}
	a := accept(trace.Request{SessionID: "a", ChatID: 1, ParentChatID: -1})
	b := accept(trace.Request{SessionID: "b", ChatID: 2, ParentChatID: -1})
	if a == b {
		t.Fatalf("sessions a and b share slot %d", a)
	}
	if got := accept(trace.Request{ChatID: 3, ParentChatID: 1}); got != a { // session from the parent
		t.Fatalf("a's second turn in slot %d, want %d", got, a)
	}
	c.ForgetSlot(a)
	c.ForgetSlot(a)  // already free
	c.ForgetSlot(99) // never held
	if s, ch := c.Tracked(); s != 1 || ch != 1 {
		t.Fatalf("after forgetting a's slot: %d sessions, %d chats, want 1 and 1", s, ch)
	}
	if got := accept(trace.Request{SessionID: "c", ChatID: 4, ParentChatID: -1}); got != a {
		t.Fatalf("c in slot %d, want a's freed slot %d", got, a)
	}
	if got := accept(trace.Request{SessionID: "b", ChatID: 5, ParentChatID: 2}); got != b {
		t.Fatalf("b's second turn in slot %d, want %d", got, b)
	}
	if got := accept(trace.Request{SessionID: "a", ChatID: 6, ParentChatID: -1}); got == a || got == b {
		t.Fatalf("a reopened in slot %d, held by c or b", got)
	}
}
