package main

import (
	"testing"

	"hubu.dev/hubu/e2e/stack"
)

func TestServiceProcs(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOMAXPROCS" {
				return v
			}
			return ""
		}
	}
	if n, err := serviceProcs(env("")); err != nil || n != stack.SharedProcs() || n < 1 {
		t.Fatalf("by default: %d %v, want the machine's share %d", n, err, stack.SharedProcs())
	}
	if n, err := serviceProcs(env("3")); err != nil || n != 3 {
		t.Fatalf("GOMAXPROCS=3: %d %v", n, err)
	}
	for _, bad := range []string{"0", "-1", "two"} {
		if _, err := serviceProcs(env(bad)); err == nil {
			t.Errorf("GOMAXPROCS=%s was taken", bad)
		}
	}
}
