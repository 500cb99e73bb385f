package trace

// decodeRequest parses one canonical line into req, reusing req.HashIDs.
//
// It is a hand-rolled parser rather than encoding/json because reading is on
// the simulator's start-up path and encoding/json (reflection, one allocation
// per field) reads canonical lines at well under 50 MB/s on one core; this
// one reads several times faster and allocates only the session id and type
// strings, and not even those when they repeat the previous line's.
//
// Fields a canonical line must carry (chat_id, parent_chat_id, timestamp,
// input_length, output_length, hash_ids) are checked for presence;
// session_id and turn may be absent in Bailian-style files and are then left
// empty/zero for the caller to derive. Unknown fields are skipped, so files
// with extra columns still read. Errors name the field and what was expected;
// the Reader adds file and line.
func decodeRequest(line []byte, req *Request) error {
	d := decoder{b: line}
	hashes := req.HashIDs[:0]
	prevSession, prevType := req.SessionID, req.Type
	var r Request
	var seen uint8
	const (
		sChat = 1 << iota
		sParent
		sTS
		sIn
		sOut
		sHash
	)
	d.ws()
	if !d.eat('{') {
		return d.syntax("expected '{' at the start of a request object")
	}
	d.ws()
	if d.eat('}') {
		return missing("chat_id")
	}
	for {
		d.ws()
		key, err := d.str()
		if err != nil {
			return d.syntax("expected a quoted field name")
		}
		d.ws()
		if !d.eat(':') {
			return d.syntax("expected ':' after field name")
		}
		d.ws()
		switch string(key) {
		case "session_id":
			s, null, err := d.strField("session_id")
			if err != nil {
				return err
			}
			if !null {
				r.SessionID = intern(s, prevSession)
			}
		case "parent_session_id":
			s, null, err := d.strField("parent_session_id")
			if err != nil {
				return err
			}
			if !null {
				r.ParentSessionID = string(s)
			}
		case "type":
			s, null, err := d.strField("type")
			if err != nil {
				return err
			}
			if !null {
				r.Type = intern(s, prevType)
			}
		case "chat_id":
			v, err := d.intField("chat_id")
			if err != nil {
				return err
			}
			r.ChatID, seen = v, seen|sChat
		case "parent_chat_id":
			v, err := d.intField("parent_chat_id")
			if err != nil {
				return err
			}
			r.ParentChatID, seen = v, seen|sParent
		case "turn":
			v, err := d.intField("turn")
			if err != nil {
				return err
			}
			r.Turn = int(v)
		case "input_length":
			v, err := d.intField("input_length")
			if err != nil {
				return err
			}
			r.InputLength, seen = int(v), seen|sIn
		case "output_length":
			v, err := d.intField("output_length")
			if err != nil {
				return err
			}
			r.OutputLength, seen = int(v), seen|sOut
		case "timestamp":
			v, null, err := d.floatField("timestamp")
			if err != nil {
				return err
			}
			if null {
				return &Error{Field: "timestamp", Msg: "got null, expected " + fieldExpect["timestamp"]}
			}
			r.Timestamp, seen = v, seen|sTS
		case "think_time_s":
			v, null, err := d.floatField("think_time_s")
			if err != nil {
				return err
			}
			if !null {
				r.ThinkTimeS = &v
			}
		case "hash_ids":
			if hashes, err = d.hashes(hashes); err != nil {
				return err
			}
			if hashes == nil {
				hashes = []uint64{} // present but empty, as encoding/json has it
			}
			seen |= sHash
		default:
			if err := d.skip(0); err != nil {
				return err
			}
		}
		d.ws()
		if d.eat(',') {
			continue
		}
		if d.eat('}') {
			break
		}
		return d.syntax("expected ',' or '}' after a value")
	}
	d.ws()
	if d.i != len(d.b) {
		return d.syntax("unexpected data after the request object")
	}
	switch {
	case seen&sChat == 0:
		return missing("chat_id")
	case seen&sParent == 0:
		return missing("parent_chat_id")
	case seen&sTS == 0:
		return missing("timestamp")
	case seen&sIn == 0:
		return missing("input_length")
	case seen&sOut == 0:
		return missing("output_length")
	case seen&sHash == 0:
		return missing("hash_ids")
	}
	r.HashIDs = hashes
	*req = r
	return nil
}

func missing(f string) error {
	return &Error{Field: f, Msg: "missing; expected " + fieldExpect[f]}
}

// intern returns prev when b spells it, so that a file whose lines repeat one
// session id or type costs no allocation for it.
func intern(b []byte, prev string) string {
	if string(b) == prev {
		return prev
	}
	return string(b)
}

var fieldExpect = map[string]string{
	"chat_id":           "an integer unique in the file",
	"parent_chat_id":    "an integer chat id, or -1 for a session root",
	"timestamp":         "seconds from the trace start (number)",
	"input_length":      "a non-negative token count",
	"output_length":     "a non-negative token count",
	"hash_ids":          "an array of non-negative integer block ids",
	"turn":              "an integer turn number counting from 1",
	"think_time_s":      "seconds (number) or null",
	"session_id":        "a string",
	"parent_session_id": "a string",
	"type":              "a string",
}
