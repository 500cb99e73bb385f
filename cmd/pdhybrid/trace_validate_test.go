package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateReportsEveryProblem(t *testing.T) {
	body := `{"pdhybrid_trace":1,"block_size":4}
{"session_id":"a","chat_id":1,"parent_chat_id":-1,"turn":1,"timestamp":5,"input_length":8,"output_length":1,"hash_ids":[1,2]}
{"session_id":"a","chat_id":2,"parent_chat_id":1,"turn":2,"timestamp":4,"input_length":8,"output_length":1,"hash_ids":[1,2]}
{"session_id":"b","chat_id":2,"parent_chat_id":7,"turn":2,"timestamp":6,"input_length":-8,"output_length":1,"hash_ids":[]}
{"session_id":"c","chat_id":9,"parent_chat_id":-1,"turn":1,"timestamp":"x","input_length":8,"output_length":1,"hash_ids":[1,2]}
`
	p := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(p, []byte(body), 0o644)
	out, _, err := runCLI("trace", "validate", p)
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{
		p + `:3: field "timestamp": got 4, earlier than the parent's 5`,
		p + `:4: field "chat_id": 2 already used on line 3`,
		p + `:4: field "parent_chat_id": 7 does not appear`,
		p + `:4: field "input_length": got -8`,
		p + `:5: field "timestamp": got a string`,
		"NOT in global timestamp order",
		"INVALID: 5 problems",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runCLI("trace", "validate", "--max-listed", "2", p)
	if !strings.Contains(out, "... and 3 more problems") {
		t.Errorf("cap not applied:\n%s", out)
	}
}

func TestValidateRefusesRawFormats(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.jsonl")
	os.WriteFile(p, []byte(`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}`+"\n"), 0o644)
	if _, _, err := runCLI("trace", "validate", p); err == nil || !strings.Contains(err.Error(), "convert --from mooncake") {
		t.Fatalf("err %v", err)
	}
}
