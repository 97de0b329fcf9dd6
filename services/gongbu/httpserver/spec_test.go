package httpserver

import (
	"testing"

	"hubu.dev/hubu/proto/gongbuapi"
)

// The server checks public handles with its own regular expression; it must be the one the
// spec publishes, or clients would be told one thing and held to another.
func TestSpecPatterns(t *testing.T) {
	doc, err := gongbuapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	path := doc.Paths.Find("/v1/operations/{public_handle}/execution")
	if path == nil {
		t.Fatal("no operation execution path in the spec")
	}
	p := path.Parameters.GetByInAndName("path", "public_handle")
	if p == nil || p.Schema == nil || p.Schema.Value == nil {
		t.Fatal("no public_handle parameter in the spec")
	}
	if got, want := publicHandleRE.String(), p.Schema.Value.Pattern; got != want {
		t.Fatalf("spec pattern %q, server pattern %q", want, got)
	}
}
