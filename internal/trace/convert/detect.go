package convert

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
)

// Detect guesses a file's format from its first non-empty line, so that
// `trace stats` and `trace validate` can read a raw Mooncake file or a weka
// directory without being told:
//
//   - a directory, or a document whose first line opens a JSON object that
//     does not close on that line (a pretty-printed session), or one line
//     holding "requests": weka;
//   - a first line with "pdhybrid_trace": canonical with header;
//   - a first line with "chat_id": canonical schema without header;
//   - a first line with "timestamp" and "hash_ids" but no "chat_id": mooncake.
func Detect(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "weka", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		has := func(k string) bool { return bytes.Contains(line, []byte(`"`+k+`"`)) }
		switch {
		case has("pdhybrid_trace"):
			return "canonical", nil
		case has("chat_id"):
			return "canonical", nil
		case has("timestamp") && has("hash_ids"):
			return "mooncake", nil
		case has("requests") || (line[0] == '{' && line[len(line)-1] != '}'):
			return "weka", nil
		}
		return "", fmt.Errorf("%s: cannot tell the format from the first line; give --from", path)
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return "", fmt.Errorf("%s: empty file", path)
}
