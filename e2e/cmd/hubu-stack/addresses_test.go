package main

import (
	"maps"
	"testing"

	"hubu.dev/hubu/e2e/stack"
)

func TestAddresses(t *testing.T) {
	root := t.TempDir()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

	def := must(stack.PlaceOf(root, ""))(t)
	got := must(addresses(def, env(nil)))(t)
	want := map[string]string{"hubu": "127.0.0.1:8081", "gongbu": "127.0.0.1:8082", "mockflux": "127.0.0.1:8083", "router": "127.0.0.1:8090"}
	if !maps.Equal(got, want) {
		t.Errorf("the default stack listens on %v, want %v", got, want)
	}

	a, b := must(stack.PlaceOf(root, "a"))(t), must(stack.PlaceOf(root, "b"))(t)
	first := must(addresses(a, env(nil)))(t)
	if again := must(addresses(a, env(nil)))(t); !maps.Equal(first, again) {
		t.Errorf("stack a moved from %v to %v between two starts", first, again)
	}
	other := must(addresses(b, env(nil)))(t)
	seen := map[string]bool{}
	for _, m := range []map[string]string{want, first, other} {
		for _, addr := range m {
			if seen[addr] {
				t.Errorf("%s is given to two stacks: default %v, a %v, b %v", addr, want, first, other)
			}
			seen[addr] = true
		}
	}

	moved := must(addresses(a, env(map[string]string{"HUBU_STACK_HUBU_ADDR": "127.0.0.1:1234"})))(t)
	if moved["hubu"] != "127.0.0.1:1234" || moved["router"] != first["router"] {
		t.Errorf("with HUBU_STACK_HUBU_ADDR set, stack a listens on %v", moved)
	}
	if kept := must(addresses(a, env(nil)))(t); !maps.Equal(kept, first) {
		t.Errorf("a setting for one start changed the ports stack a keeps: %v, was %v", kept, first)
	}
}

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
