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
	next := 0 // the canonical key expected next
	for {
		d.ws()
		var f field
		if k := canonKeys[next]; len(d.b)-d.i >= len(k.quoted) && string(d.b[d.i:d.i+len(k.quoted)]) == k.quoted {
			d.i += len(k.quoted) // the key pdhybrid's writer puts here
			f, next = k.f, next+1
		} else {
			key, err := d.str()
			if err != nil {
				return d.syntax("expected a quoted field name")
			}
			f = fieldOf(key)
			if at := canonAt[f]; at > 0 {
				next = at
			}
		}
		d.ws()
		if !d.eat(':') {
			return d.syntax("expected ':' after field name")
		}
		d.ws()
		switch f {
		case fSession:
			s, null, err := d.strField("session_id")
			if err != nil {
				return err
			}
			if !null {
				r.SessionID = intern(s, prevSession)
			}
		case fParentSession:
			s, null, err := d.strField("parent_session_id")
			if err != nil {
				return err
			}
			if !null {
				r.ParentSessionID = string(s)
			}
		case fType:
			s, null, err := d.strField("type")
			if err != nil {
				return err
			}
			if !null {
				r.Type = intern(s, prevType)
			}
		case fChat:
			v, err := d.intField("chat_id")
			if err != nil {
				return err
			}
			r.ChatID, seen = v, seen|sChat
		case fParentChat:
			v, err := d.intField("parent_chat_id")
			if err != nil {
				return err
			}
			r.ParentChatID, seen = v, seen|sParent
		case fTurn:
			v, err := d.intField("turn")
			if err != nil {
				return err
			}
			r.Turn = int(v)
		case fIn:
			v, err := d.intField("input_length")
			if err != nil {
				return err
			}
			r.InputLength, seen = int(v), seen|sIn
		case fOut:
			v, err := d.intField("output_length")
			if err != nil {
				return err
			}
			r.OutputLength, seen = int(v), seen|sOut
		case fTS:
			v, null, err := d.floatField("timestamp")
			if err != nil {
				return err
			}
			if null {
				return &Error{Field: "timestamp", Msg: "got null, expected " + fieldExpect["timestamp"]}
			}
			r.Timestamp, seen = v, seen|sTS
		case fThink:
			v, null, err := d.floatField("think_time_s")
			if err != nil {
				return err
			}
			if !null {
				r.ThinkTimeS = &v
			}
		case fHash:
			var err error
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

// field names a request's JSON field.
type field uint8

const (
	fUnknown field = iota
	fSession
	fParentSession
	fType
	fChat
	fParentChat
	fTurn
	fIn
	fOut
	fTS
	fThink
	fHash
	nFields
)

func fieldOf(key []byte) field {
	switch string(key) {
	case "session_id":
		return fSession
	case "parent_session_id":
		return fParentSession
	case "type":
		return fType
	case "chat_id":
		return fChat
	case "parent_chat_id":
		return fParentChat
	case "turn":
		return fTurn
	case "input_length":
		return fIn
	case "output_length":
		return fOut
	case "timestamp":
		return fTS
	case "think_time_s":
		return fThink
	case "hash_ids":
		return fHash
	}
	return fUnknown
}

// canonKeys are the keys in the order Writer writes them, quoted as they
// appear on a line, optional ones left out: a line of pdhybrid's own has
// each key where the one before predicts it, and comparing a dozen bytes
// costs less than lexing the string and looking it up. A miss (an optional
// field, another writer's order) reads the key as any other string. The
// sentinel at the end never matches.
var canonKeys = [...]struct {
	quoted string
	f      field
}{
	{`"session_id"`, fSession}, {`"chat_id"`, fChat}, {`"parent_chat_id"`, fParentChat}, {`"turn"`, fTurn},
	{`"timestamp"`, fTS}, {`"input_length"`, fIn}, {`"output_length"`, fOut}, {`"type"`, fType},
	{`"hash_ids"`, fHash}, {"\x00", fUnknown},
}

// canonAt is, for a field of canonKeys, the index of the key after it.
var canonAt = func() (at [nFields]int) {
	for i, k := range canonKeys[:len(canonKeys)-1] {
		at[k.f] = i + 1
	}
	return at
}()

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
