package scrub

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	t.Parallel()
	key := "hubu:operation:v1:codex:6f1c2a4e-9b7d-4c3e-8a21-0d5f6e7a8b9c"
	doc := `{"a":"` + key + `","b":["x","prefix ` + key + ` suffix",{"` + key + `":{"c":"` + key + key + `"}}],"n":12345678901234567890,"t":true,"z":null}`
	out, err := JSON([]byte(doc), key)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), key) || strings.Contains(string(out), "6f1c2a4e") {
		t.Fatalf("the key survived: %s", out)
	}
	if !json.Valid(out) || !strings.Contains(string(out), "12345678901234567890") || !strings.Contains(string(out), "prefix [redacted] suffix") {
		t.Fatalf("the document changed beyond the key: %s", out)
	}
	if same, _ := JSON([]byte(doc)); string(same) != doc {
		t.Fatal("no secrets must leave the document as it is")
	}
	if _, err := JSON([]byte(`{"a":`), key); err == nil {
		t.Fatal("invalid JSON accepted")
	}
}

func TestVariants(t *testing.T) {
	t.Parallel()
	key := "hubu:operation:v1:codex:6f1c2a4e-9b7d-4c3e-8a21-0d5f6e7a8b9c"
	doc := `{"a":"id 6f1c2a4e-9b7d-4c3e-8a21-0d5f6e7a8b9c","b":"q=hubu%3Aoperation%3Av1%3Acodex%3A6f1c2a4e-9b7d-4c3e-8a21-0d5f6e7a8b9c","c":"` + key + `"}`
	out, err := JSON([]byte(doc), Variants(key)...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "6f1c2a4e") {
		t.Fatalf("a form of the key survived: %s", out)
	}
}

// A key the caller does not know of is found by its form, plain or URL-encoded, and removed
// with every variant of it.
func TestKeysIn(t *testing.T) {
	t.Parallel()
	key := "hubu:operation:v1:claude-code:0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	doc := `{"a":"` + key + `","b":"q=hubu%3Aoperation%3Av1%3Acodex%3A11111111-2222-4333-8444-555555555555","c":"public hubu:public-operation:v1:0a1b2c3d-4e5f-4a6b-8c7d-000000000000"}`
	out, err := JSON([]byte(doc), KeysIn([]byte(doc))...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d") || strings.Contains(string(out), "11111111-2222") {
		t.Fatalf("a key survived: %s", out)
	}
	if !strings.Contains(string(out), "hubu:public-operation:v1:0a1b2c3d-4e5f-4a6b-8c7d-000000000000") {
		t.Fatalf("the public handle was touched: %s", out)
	}
	if got := KeysIn([]byte(`{"status":"succeeded","image":"iVBORw0KGgo"}`)); got != nil {
		t.Fatalf("keys found where there are none: %v", got)
	}
}
