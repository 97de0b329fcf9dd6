package argguard

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckRefusesIdentityKeys(t *testing.T) {
	t.Parallel()
	keys := []string{
		"operation_key", "operationKey", "OperationKey", "callId", "call_id", "CALL-ID", "tool_use_id",
		"toolUseId", "Tool-Call-ID", "tool_call_id", "invocation.id", "invocationId", "harness/call_id",
		"harnessCallId", "Idempotency-Key", "idempotency_key", "request_id", "requestId", "taskId",
		"task_id", "PLATFORM", "platform", "Platform", "installation_id", "installationId", "_meta",
		"meta", "META", "claudecode/toolUseId", "claude-code/tool_use_id", "hubu.dev/platform-invocation",
		"hubu_dev_platform_invocation", "c_a_l_l_i_d", "call__id", "..callid//", "-/._meta._/-",
	}
	for _, k := range keys {
		for _, doc := range []string{
			`{"` + k + `":"x"}`,
			`{"prompt":"fox","` + k + `":1}`,
			`{"options":{"` + k + `":{"nested":true}}}`,
			`{"options":{"x":[{"a":1},{"` + k + `":null}]}}`,
			`[{"` + k + `":[]}]`,
			`{"a":[[[[{"b":[{"` + k + `":0}]}]]]]}`,
		} {
			err := Check([]byte(doc))
			var ie *IdentityError
			if !errors.As(err, &ie) || !errors.Is(err, ErrIdentityInArguments) {
				t.Errorf("Check(%s) = %v, want an *IdentityError", doc, err)
				continue
			}
			if ie.Key != k || ie.Truncated {
				t.Errorf("Check(%s) names %q (truncated %v), want %q", doc, ie.Key, ie.Truncated, k)
			}
			if errors.Is(err, ErrMalformed) {
				t.Errorf("Check(%s): identity error matches ErrMalformed", doc)
			}
		}
	}
}

func TestCheckRefusesEscapedAndUnicodeKeys(t *testing.T) {
	t.Parallel()
	cases := []struct{ doc, shown string }{
		{`{"\u0063all\u0049d":1}`, "callId"},                 // escapes are decoded before the check
		{`{"call\/id":1}`, "call/id"},                        // an escaped slash is still a slash
		{`{"CALL\u0130D":1}`, "CALL\u0130D"},                 // U+0130 lower-cases to "i"
		{`{"idempotency\u212Aey":1}`, "idempotency\u212Aey"}, // Kelvin sign lower-cases to "k"
		{`{"options":{"x":[{"call_id":"1"}]}}`, "call_id"},
		{`{"ok":1,"ok":2,"callId":3}`, "callId"}, // duplicates don't hide later keys
		{`{"callId":1,"callId":2}`, "callId"},
		// Check scans the bytes: escapes and structural characters inside strings end nothing.
		{`{"a\\":"x","callId":1}`, "callId"},
		{`{"a{":1,"b]":[":",",","}"],"c\"":{"call_id":1}}`, "call_id"},
		{`{"` + strings.Repeat("_", 40) + `CallId":1}`, strings.Repeat("_", 40) + "CallId"},
	}
	for _, c := range cases {
		err := Check([]byte(c.doc))
		var ie *IdentityError
		if !errors.As(err, &ie) {
			t.Errorf("Check(%s) = %v, want an *IdentityError", c.doc, err)
			continue
		}
		if ie.Key != c.shown {
			t.Errorf("Check(%s) names %q, want %q", c.doc, ie.Key, c.shown)
		}
	}
}

func TestCheckAllows(t *testing.T) {
	t.Parallel()
	docs := []string{
		``, ` `, `null`, `{}`, `[]`, `"callId"`, `1`,
		`{"prompt":"a red fox","model":"flux-dev","width":1024,"height":768,"seed":42}`,
		`{"metadata":{"a":1}}`,
		`{"request":"x","platforms":["codex"],"operation":"x","key":"k","call":"c","id":"i","task":"t"}`,
		`{"meta_data":1,"metas":1,"_metadata":1,"callIds":1,"call_id_x":1,"xcallid":1,"platform1":1}`,
		`{"prompt":"callId"}`,
		`{"prompt":"operation_key","tags":["call_id","tool_use_id","_meta",{"x":"platform"}]}`,
		`{"notes":{"text":"{\"callId\":\"1\"}"}}`, // JSON inside a string is a value
		`{"a":[{"b":{"c":["meta","platform"]}}]}`,
		`{"call id":1,"call+id":1,"call\u200bid":1}`, // only _ - . / are removed
		`{"a":1,"a":2}`, // duplicates are reqhash's business, not argguard's
		`{"a":1e400,"b":-0,"c":1.5e-400}`,
		"{\"call\xffid\":1}", // invalid UTF-8 is reqhash's business
		`{"callid` + strings.Repeat("x", 40) + `":1,"` + strings.Repeat("callid", 6) + `":2}`, // longer than any entry
		`{"a":"\"callId\":1","b":["{\"callId\""]}`,
	}
	for _, doc := range docs {
		if err := Check([]byte(doc)); err != nil {
			t.Errorf("Check(%s) = %v, want nil", doc, err)
		}
	}
}

func TestCheckMalformed(t *testing.T) {
	t.Parallel()
	docs := []string{
		`{`, `{"a":`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `{"callId"`, `{callId:1}`, `{'callId':1}`,
		`{"a":1}{"callId":2}`, `{"a":1} x`, `{} {}`, `{"a":01}`, `{"a":+1}`, `{"a":NaN}`, `{"a":.5}`,
		"{\"a\":\"x\ny\"}", "\ufeff{}", `prompt=fox`, `{"a":"\x41"}`,
	}
	for _, doc := range docs {
		err := Check([]byte(doc))
		var me *MalformedError
		if !errors.As(err, &me) || !errors.Is(err, ErrMalformed) {
			t.Errorf("Check(%s) = %v, want a *MalformedError", doc, err)
			continue
		}
		if errors.Is(err, ErrIdentityInArguments) {
			t.Errorf("Check(%s): malformed error matches ErrIdentityInArguments", doc)
		}
		if me.Offset < 0 || me.Offset > int64(len(doc)) {
			t.Errorf("Check(%s): offset %d", doc, me.Offset)
		}
		if strings.Contains(err.Error(), "callId") || strings.Contains(err.Error(), "fox") {
			t.Errorf("Check(%s): message quotes the input: %v", doc, err)
		}
	}
}

func TestIdentityErrorShowsKeySafely(t *testing.T) {
	t.Parallel()
	long := "idempotency_key" + strings.Repeat("_", 100)
	err := Check([]byte(`{"` + long + `":"SECRETVALUE"}`))
	var ie *IdentityError
	if !errors.As(err, &ie) {
		t.Fatalf("Check = %v", err)
	}
	if utf8.RuneCountInString(ie.Key) != MaxKeyShown || !ie.Truncated || ie.Key != long[:MaxKeyShown] {
		t.Errorf("key %q (truncated %v)", ie.Key, ie.Truncated)
	}
	if !strings.HasSuffix(err.Error(), `key "`+long[:MaxKeyShown]+`"... is reserved; the call's identity comes from the MCP client (_meta), never from arguments`) {
		t.Errorf("message %q", err)
	}
	if strings.Contains(err.Error(), "SECRETVALUE") {
		t.Errorf("message quotes a value: %q", err)
	}

	// A key that normalizes into the list holds only letters and _ - . /, but the error type does
	// not rely on that: control and formatting characters are dropped before the length cap.
	ie = identityError("call\x00_\n\x1b[31mid\u202e\u200d\u0085" + strings.Repeat("é", 70))
	if want := "call_[31mid" + strings.Repeat("é", MaxKeyShown-len("call_[31mid")); ie.Key != want || !ie.Truncated {
		t.Errorf("key %q (truncated %v), want %q", ie.Key, ie.Truncated, want)
	}

	// Long keys normalize into the list too.
	long = "re" + strings.Repeat("/", 70) + "quest_id"
	err = Check([]byte(`{"x":{"` + long + `":1}}`))
	if !errors.As(err, &ie) || !ie.Truncated || ie.Key != long[:MaxKeyShown] {
		t.Errorf("Check = %v", err)
	}
	allowed := "request_id" + strings.Repeat("é", 80) // é is not removed: allowed
	if err := Check([]byte(`{"` + allowed + `":1}`)); err != nil {
		t.Errorf("Check = %v", err)
	}
}

func TestNormalized(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"operation_key":                "operationkey",
		"Tool-Call-ID":                 "toolcallid",
		"invocation.id":                "invocationid",
		"harness/call_id":              "harnesscallid",
		"claudecode/toolUseId":         "claudecodetooluseid",
		"hubu.dev/platform-invocation": "hubudevplatforminvocation",
		"_meta":                        "meta",
		"metadata":                     "metadata",
		"a b":                          "a b",
		"":                             "",
		"___":                          "",
	}
	for in, want := range cases {
		if got := Normalized(in); got != want {
			t.Errorf("Normalized(%q) = %q, want %q", in, got, want)
		}
	}
	for _, k := range Forbidden {
		if Normalized(k) != k {
			t.Errorf("Forbidden entry %q is not normalized", k)
		}
		if !IsForbidden(k) {
			t.Errorf("IsForbidden(%q) = false", k)
		}
	}
	if len(Forbidden) != 14 {
		t.Errorf("Forbidden has %d entries; the identity rules list 14", len(Forbidden))
	}
}

func BenchmarkCheck(b *testing.B) {
	args := []byte(`{"prompt":"A watercolor painting of a lighthouse on a rocky coast at dusk","model":"flux-pro-1.1","width":1024,"height":768,"seed":1234567}`)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(args); err != nil {
			b.Fatal(err)
		}
	}
}
