package httpserver

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// Gongbu answers exactly the codes of its one status table; the spec's Problem enum and the
// README's table of Gongbu's errors list exactly those, with the same statuses.
func TestErrorCodesAreDocumented(t *testing.T) {
	doc, err := gongbuapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for code, status := range statusOf {
		want[string(code)] = status
	}
	enum := map[string]int{}
	for _, v := range doc.Components.Schemas["Problem"].Value.Properties["code"].Value.Enum {
		enum[v.(string)] = want[v.(string)]
	}
	if !maps.Equal(enum, want) {
		t.Errorf("the spec's Problem codes %v are not the server's %v", slices.Sorted(maps.Keys(enum)), slices.Sorted(maps.Keys(want)))
	}

	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "Gongbu's are these and no others")
	if !ok {
		t.Fatal("README.md has no table of Gongbu's error codes")
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|")
	documented := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(strings.SplitN(section, "\n\n", 3)[1], -1) {
		status, _ := strconv.Atoi(m[2])
		documented[m[1]] = status
	}
	if !maps.Equal(documented, want) {
		t.Errorf("README.md documents Gongbu's errors as %v; the server answers %v", documented, want)
	}
}
