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

	"hubu.dev/hubu/proto/gongbuspec"
)

// Gongbu answers exactly the codes of its one status table; the spec's Problem enum and the
// docs' table of Gongbu's errors (docs/http-api.md) list exactly those, with the same statuses.
func TestErrorCodesAreDocumented(t *testing.T) {
	doc, err := gongbuspec.GetSpec()
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

	page, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "http-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "Gongbu's are these and no others")
	if !ok {
		t.Fatal("docs/http-api.md has no table of Gongbu's error codes")
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|")
	documented := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(strings.SplitN(section, "\n\n", 3)[1], -1) {
		status, _ := strconv.Atoi(m[2])
		documented[m[1]] = status
	}
	if !maps.Equal(documented, want) {
		t.Errorf("docs/http-api.md documents Gongbu's errors as %v; the server answers %v", documented, want)
	}
}
