package mooncake

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/tracetest"
)

func TestParseLine(t *testing.T) {
	r, err := ParseLine([]byte(` {"timestamp": 1500, "input_length": 600, "output_length": 3, "hash_ids": [0, 7]} `))
	if err != nil || r.TimestampMs != 1500 || r.InputLength != 600 || len(r.HashIDs) != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	bad := []struct{ line, field, msg string }{
		{`{"input_length": 1, "output_length": 1, "hash_ids": []}`, "timestamp", "missing"},
		{`{"timestamp": -5, "input_length": 1, "output_length": 1, "hash_ids": []}`, "timestamp", "non-negative"},
		{`{"timestamp": 0, "input_length": -1, "output_length": 1, "hash_ids": []}`, "input_length", "non-negative"},
		{`{"timestamp": 0, "input_length": 1, "output_length": 1}`, "hash_ids", "missing"},
		{`{"timestamp": 0, "input_length": "x", "output_length": 1, "hash_ids": []}`, "input_length", "got JSON string"},
		{`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [-3]}`, "hash_ids", "non-negative"},
		{`{"timestamp": 0,`, "", "malformed JSON"},
	}
	for _, c := range bad {
		_, err := ParseLine([]byte(c.line))
		var te *trace.Error
		if !errors.As(err, &te) || te.Field != c.field || !strings.Contains(te.Msg, c.msg) {
			t.Errorf("%s: got %v", c.line, err)
		}
	}
}

// TestInfer walks the rule through its cases: growth (continuation), a
// parent missing only its partial tail block (continuation), a shared
// system-prompt block only (partial: new session), and a second child of
// an already-continued parent (fork: new session).
func TestInfer(t *testing.T) {
	in := NewInferrer()
	recs := []struct {
		ids     []uint64
		sess    string
		parent  int64
		turn    int
		comment string
	}{
		{[]uint64{0, 1, 2}, "mc0", -1, 1, "root"},
		{[]uint64{0, 1, 2, 3}, "mc0", 0, 2, "grows"},
		{[]uint64{0, 1, 2, 5}, "mc0", 1, 3, "parent 1's last block replaced"},
		{[]uint64{0, 9}, "mc1", -1, 1, "shares only block 0"},
		{[]uint64{0, 1, 2, 3, 8}, "mc2", -1, 1, "fork from request 1, already continued"},
		{[]uint64{0, 9, 10}, "mc1", 3, 2, "continues mc1"},
		{nil, "mc3", -1, 1, "empty prompt"},
	}
	for i, c := range recs {
		r := in.Add(Record{TimestampMs: float64(i * 1000), InputLength: 512 * len(c.ids), HashIDs: c.ids})
		if r.SessionID != c.sess || r.ParentChatID != c.parent || r.Turn != c.turn || r.ChatID != int64(i) || r.Timestamp != float64(i) {
			t.Errorf("%d (%s): got session %s parent %d turn %d", i, c.comment, r.SessionID, r.ParentChatID, r.Turn)
		}
	}
	if in.Sessions != 4 || in.Continuations != 3 || in.Forks != 1 || in.Partial != 1 {
		t.Errorf("sessions %d continuations %d forks %d partial %d", in.Sessions, in.Continuations, in.Forks, in.Partial)
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}`))
	f.Add([]byte(`{"timestamp": 1e3, "input_length": 1, "output_length": 0, "hash_ids": []}`))
	f.Add([]byte(`{"timestamp": null}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := ParseLine(line)
		if err != nil {
			var te *trace.Error
			if !errors.As(err, &te) || te.Msg == "" {
				t.Fatalf("error is not a *trace.Error: %v", err)
			}
			return
		}
		if rec.InputLength < 0 || rec.OutputLength < 0 || rec.TimestampMs < 0 {
			t.Fatalf("accepted a negative value: %+v", rec)
		}
		NewInferrer().Add(rec)
	})
}

// TestSharedMooncake infers sessions on the real FAST'25 trace when present.
func TestSharedMooncake(t *testing.T) {
	path := tracetest.SharedTraces(t, "mooncake/conversation_trace.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	in := NewInferrer()
	n, sum := 0, 0
	chk := trace.NewChecker(DefaultBlockSize)
	for sc.Scan() {
		rec, err := ParseLine(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		r := in.Add(rec)
		n++
		sum += r.InputLength
		if errs := chk.Check(&r, n); len(errs) > 0 {
			t.Fatal(errs[0])
		}
		chk.Accept(&r, n)
	}
	if n != 12031 || (sum+n/2)/n != 12035 {
		t.Fatalf("requests %d mean input %d", n, sum/n)
	}
	if in.Sessions+in.Continuations != n {
		t.Fatalf("sessions %d + continuations %d != %d", in.Sessions, in.Continuations, n)
	}
}
