package argguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The contract's list and normalization, written out again so the fuzz check does not trust the
// code under test.
var contractForbidden = map[string]bool{
	"operationkey": true, "callid": true, "tooluseid": true, "toolcallid": true, "invocationid": true,
	"harnesscallid": true, "idempotencykey": true, "requestid": true, "taskid": true, "platform": true,
	"installationid": true, "meta": true, "claudecodetooluseid": true, "hubudevplatforminvocation": true,
}

func contractNormalized(key string) string {
	key = strings.ToLower(key)
	for _, c := range []string{"_", "-", ".", "/"} {
		key = strings.ReplaceAll(key, c, "")
	}
	return key
}

// forbiddenKeys walks a value decoded by encoding/json and returns every key that names identity.
func forbiddenKeys(v any, found []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if contractForbidden[contractNormalized(k)] {
				found = append(found, k)
			}
			found = forbiddenKeys(e, found)
		}
	case []any:
		for _, e := range v {
			found = forbiddenKeys(e, found)
		}
	}
	return found
}

// FuzzCheck checks, for any input: no panic; malformed JSON is refused as malformed; an accepted
// input has no identity key at any depth, and a refused one has one, as an independent walk over
// encoding/json's decoded value sees it; the error shows a short key without control characters.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"options":{"x":[{"call_id":"1"}]}}`))
	f.Add([]byte(`{"prompt":"callId","metadata":{}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		err := Check(in)
		blank := len(bytes.Trim(in, " \t\r\n")) == 0 // JSON whitespace; \f and \v are not
		if !blank && !json.Valid(in) {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Check(%q) = %v on malformed JSON", in, err)
			}
			return
		}
		var v any
		if !blank {
			dec := json.NewDecoder(bytes.NewReader(in))
			dec.UseNumber() // 1e700 is valid JSON but no float64
			if derr := dec.Decode(&v); derr != nil {
				t.Fatalf("json.Valid but Decode fails: %v", derr)
			}
		}
		found := forbiddenKeys(v, nil)
		var ie *IdentityError
		switch {
		case err == nil:
			if len(found) > 0 {
				t.Fatalf("Check(%q) accepted identity keys %q", in, found)
			}
		case errors.As(err, &ie):
			if len(found) == 0 {
				t.Fatalf("Check(%q) refused %q, but no key names identity", in, ie.Key)
			}
			if utf8.RuneCountInString(ie.Key) > MaxKeyShown || !utf8.ValidString(ie.Key) {
				t.Fatalf("shown key %q is too long or not UTF-8", ie.Key)
			}
			if strings.IndexFunc(ie.Key, unicode.IsControl) >= 0 {
				t.Fatalf("shown key %q has control characters", ie.Key)
			}
			shownOK := false
			for _, k := range found {
				shownOK = shownOK || strings.HasPrefix(k, ie.Key)
			}
			if !shownOK {
				t.Fatalf("shown key %q is none of %q", ie.Key, found)
			}
		default:
			t.Fatalf("Check(%q) = %v on valid JSON", in, err)
		}
	})
}
