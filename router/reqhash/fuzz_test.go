package reqhash

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzHash checks, for any input: no panic; a refusal is an *Error; whatever encoding/json refuses
// is refused too; and an accepted input has a canonical form that is valid JSON, means the same as
// the input, and is a fixed point (hashing it again gives the same digest and the same bytes).
func FuzzHash(f *testing.F) {
	f.Add([]byte(rfcSample))
	f.Add([]byte(`{"prompt":"a red fox","model":"flux-dev","width":1024,"height":768,"seed":7}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, canonical, err := Hash("generate_image", in)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("refusal %v (%T) is not an *Error", err, err)
			}
			if e.Offset < -1 || e.Offset > len(in) {
				t.Fatalf("offset %d outside the input", e.Offset)
			}
			return
		}
		trimmed := bytes.Trim(in, " \t\r\n") // JSON whitespace; \f and \v are not
		absent := len(trimmed) == 0 || string(trimmed) == "null"
		if !absent && !json.Valid(in) {
			t.Fatalf("accepted what encoding/json refuses: %q", in)
		}
		if !json.Valid(canonical) {
			t.Fatalf("canonical form is not JSON: %q", canonical)
		}
		d2, canonical2, err := Hash("generate_image", canonical)
		if err != nil {
			t.Fatalf("canonical form %q refused: %v", canonical, err)
		}
		if d2 != d || !bytes.Equal(canonical2, canonical) {
			t.Fatalf("not idempotent:\n%q\n%q", canonical, canonical2)
		}
		if absent {
			if string(canonical) != "{}" {
				t.Fatalf("absent arguments canonicalized to %q", canonical)
			}
			return
		}
		// Same meaning: encoding/json reads both into equal values (its float64 is the double JCS
		// rounds to; duplicate keys and invalid Unicode never get this far).
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("encoding/json refuses accepted input %q: %v", in, err)
		}
		if err := json.Unmarshal(canonical, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("canonical form changes the meaning:\n%q\n%q", in, canonical)
		}
	})
}

func BenchmarkHash(b *testing.B) {
	args := []byte(`{
  "prompt": "A watercolor painting of a lighthouse on a rocky coast at dusk, warm light in the windows, seagulls, soft fog rolling in from the sea, \u00e9l\u00e9gant brush strokes",
  "model": "flux-pro-1.1",
  "width": 1024,
  "height": 768,
  "seed": 1234567
}`)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Hash("generate_image", args); err != nil {
			b.Fatal(err)
		}
	}
}
