package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/spf13/cobra"
)

// applyConfigFile sets c's flags from a YAML file whose keys are the
// command's long flag names (block-size or block_size) and whose values
// are scalars, or lists for flags that repeat (prefill, decode). A flag
// given on the command line wins over the file. Each value goes through
// the flag's own parser, and later through the same range checks as a
// command-line value, so a file is held to exactly the rules of the flags;
// an error names the file, the line and the key.
func applyConfigFile(c *cobra.Command, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return usagef("--config: %v", err)
	}
	f, err := parser.ParseBytes(b, 0)
	if err != nil {
		return usagef("--config %s: %s", path, strings.TrimSpace(yamlMessage(err)))
	}
	for _, doc := range f.Docs {
		if doc.Body == nil {
			continue
		}
		m, ok := mappingOf(doc.Body)
		if !ok {
			return usagef("--config %s:%d: want a mapping of flag names to values", path, line(doc.Body))
		}
		for _, kv := range m.Values {
			if err := applyKey(c, path, kv); err != nil {
				return err
			}
		}
	}
	return nil
}

func applyKey(c *cobra.Command, path string, kv *ast.MappingValueNode) error {
	key := strings.ReplaceAll(kv.Key.GetToken().Value, "_", "-")
	at := fmt.Sprintf("--config %s:%d: %s", path, line(kv.Key), key)
	fl := c.Flags().Lookup(key)
	if fl == nil || key == "config" || key == "help" {
		return usagef("%s: not a flag of %s%s", at, c.CommandPath(), suggestFlag(c, key))
	}
	if fl.Changed {
		return nil // the command line wins
	}
	var vals []ast.Node
	switch v := kv.Value.(type) {
	case *ast.SequenceNode:
		vals = v.Values
	case *ast.MappingNode, *ast.MappingValueNode:
		return usagef("%s: want a value or a list of values, not a mapping", at)
	default:
		vals = []ast.Node{v}
	}
	for _, v := range vals {
		s, ok := scalar(v)
		if !ok {
			return usagef("--config %s:%d: %s: want a plain value", path, line(v), key)
		}
		if err := c.Flags().Set(key, s); err != nil {
			return usagef("--config %s:%d: %s: %v", path, line(v), key, err)
		}
		// The range checks run later, on the flag; they name this line.
		c.Flags().SetAnnotation(key, configOriginKey, []string{fmt.Sprintf("%s:%d", path, line(v))})
	}
	return nil
}

// configOriginKey is the flag annotation holding "file:line" of a value a
// --config file gave (checks.fail puts it before the flag's message).
const configOriginKey = "pdhybrid/config-origin"

func mappingOf(n ast.Node) (*ast.MappingNode, bool) {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v, true
	case *ast.MappingValueNode: // a one-key document
		return &ast.MappingNode{Values: []*ast.MappingValueNode{v}}, true
	}
	return nil, false
}

func scalar(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode:
		return v.GetToken().Value, true
	}
	return "", false
}

func line(n ast.Node) int {
	if t := n.GetToken(); t != nil && t.Position != nil {
		return t.Position.Line
	}
	return 0
}

// yamlMessage is the parser's message without its source excerpt.
func yamlMessage(err error) string {
	s := err.Error()
	if i := strings.Index(s, "\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// suggestFlag is " (did you mean x?)" for a near flag name, else "".
func suggestFlag(c *cobra.Command, key string) string {
	if best := nearestFlag(c, key); best != "" {
		return " (did you mean " + best + "?)"
	}
	return ""
}
