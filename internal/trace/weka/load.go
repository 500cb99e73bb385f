package weka

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Load reads path: one session JSON, or every *.json file of a directory in
// name order (the order sessions get their arrival times).
func Load(path string) ([]Source, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return []Source{{Name: path, Data: b}}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	srcs := make([]Source, 0, len(names))
	for _, n := range names {
		p := filepath.Join(path, n)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, Source{Name: p, Data: b})
	}
	return srcs, nil
}
