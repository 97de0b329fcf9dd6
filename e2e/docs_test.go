package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every relative link in README.md and docs/ leads to a file that exists and, with a #fragment,
// to a heading in it: a topic has one home, and the others link to it, so a moved heading must
// not leave the links behind.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	docs, _ := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	docs = append(docs, filepath.Join("..", "README.md"), filepath.Join("..", "SECURITY.md"), filepath.Join("..", "CHANGELOG.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchorsOf := func(path string) map[string]bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		a := map[string]bool{}
		inFence := false
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "```") {
				inFence = !inFence
			}
			if !inFence && strings.HasPrefix(l, "#") {
				a[slug(strings.TrimLeft(l, "# "))] = true
			}
		}
		return a
	}
	for _, doc := range docs {
		for _, m := range link.FindAllStringSubmatch(string(must(os.ReadFile(doc))(t)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", filepath.Base(doc), target)
				continue
			}
			if fragment != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[fragment] {
				t.Errorf("%s links to %s, but %s has no such heading", filepath.Base(doc), target, filepath.Base(path))
			}
		}
	}
}

// slug is GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
