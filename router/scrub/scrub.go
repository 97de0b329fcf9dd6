// Package scrub removes a private operation key from everything the router sends back: the
// agent must only ever see the public handle.
package scrub

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Redacted replaces the key wherever it appears.
const Redacted = "[redacted]"

// JSON returns doc with every occurrence of each secret removed from every string, at any
// depth: values and object keys alike. doc must be valid JSON; so is the result.
func JSON(doc []byte, secrets ...string) ([]byte, error) {
	live := slices.DeleteFunc(slices.Clone(secrets), func(s string) bool { return s == "" })
	// Longest first, so a key is replaced whole before its random part alone would be.
	sort.Slice(live, func(i, j int) bool { return len(live[i]) > len(live[j]) })
	if len(live) == 0 {
		return doc, nil
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(walk(v, live))
}

// Variants are the forms in which a private operation key could be echoed: as is,
// URL-encoded, and its random part alone.
func Variants(key string) []string {
	if key == "" {
		return nil
	}
	out := []string{key, url.QueryEscape(key), url.PathEscape(key)}
	if i := strings.LastIndexByte(key, ':'); i >= 0 && len(key)-i > 8 {
		out = append(out, key[i+1:])
	}
	return out
}

// String removes every occurrence of each secret from s.
func String(s string, secrets ...string) string {
	secrets = append([]string(nil), secrets...)
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, k := range secrets {
		if k != "" {
			s = strings.ReplaceAll(s, k, Redacted)
		}
	}
	return s
}

func walk(v any, secrets []string) any {
	switch x := v.(type) {
	case string:
		return String(x, secrets...)
	case []any:
		for i := range x {
			x[i] = walk(x[i], secrets)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[String(k, secrets...)] = walk(val, secrets)
		}
		return out
	}
	return v
}

// anyKey is a private operation key of any call, as is or URL-encoded (its colons as %3A).
var anyKey = regexp.MustCompile(`(?i)hubu(?::|%3A)operation(?::|%3A)v1(?::|%3A)[a-z0-9][a-z0-9-]{0,31}(?::|%3A)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// KeysIn returns the Variants of every private operation key doc holds, whoever's it is. A
// router scrubs an answer of the key it knows behind the answer's handle; this also finds a
// key it does not know (a call whose row was pruned, or recorded by another registry), so that
// no answer ever carries one.
func KeysIn(doc []byte) []string {
	if !bytes.Contains(doc, []byte("operation")) { // keys are lower-case: most answers skip the pattern
		return nil
	}
	var out []string
	for _, m := range anyKey.FindAll(doc, -1) {
		key, err := url.QueryUnescape(string(m))
		if err != nil {
			key = string(m)
		}
		out = append(out, Variants(key)...)
		out = append(out, string(m))
	}
	return out
}
