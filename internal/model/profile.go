package model

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

//go:embed profiles/*.json
var builtin embed.FS

// Builtin returns the built-in profile for model on hardware, e.g.
// ("qwen3-30b-a3b", "h200-141g").
func Builtin(modelName, hardware string) (*Profile, error) {
	b, err := builtin.ReadFile("profiles/" + modelName + "_" + hardware + ".json")
	if err != nil {
		return nil, fmt.Errorf("no built-in profile for model %q on hardware %q (have: %s)",
			modelName, hardware, strings.Join(BuiltinNames(), ", "))
	}
	return Decode(bytes.NewReader(b), "builtin:"+modelName+"_"+hardware)
}

// BuiltinNames lists the built-in profiles as "model/hardware".
func BuiltinNames() []string {
	entries, _ := builtin.ReadDir("profiles")
	var names []string
	for _, e := range entries {
		n := strings.TrimSuffix(e.Name(), ".json")
		names = append(names, strings.Replace(n, "_", "/", 1))
	}
	sort.Strings(names)
	return names
}

// Load reads a profile file a user brought.
func Load(path string) (*Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Decode(f, path)
}

// Decode reads and validates a profile; unknown fields are errors so that a
// misspelt coefficient is not silently zero.
func Decode(r io.Reader, name string) (*Profile, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: unexpected data after the profile object", name)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &p, nil
}

// Encode writes p as indented JSON, the format Load reads.
func (p *Profile) Encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}
