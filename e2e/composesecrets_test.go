package e2e_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// The compose recipe keeps every secret out of command lines and environments, which every user
// of the host can read (ps, docker inspect): the services read each one from a compose secret
// through its *_FILE setting, and the commands docs/operations.md gives for the recipe never
// put one on a command line (the operator's hubuctl is a service of the file, reading the
// operator token from a secret).
func TestComposeRecipeKeepsSecretsInFiles(t *testing.T) {
	t.Parallel()
	secret := regexp.MustCompile(`(TOKEN|KEY|PASSWORD|DATABASE_URL)$`)
	for _, file := range []string{"../deploy/compose.yaml", "../deploy/compose.mockflux.yaml"} {
		var compose struct {
			Services map[string]struct {
				Environment map[string]string `yaml:"environment"`
			} `yaml:"services"`
		}
		noError(t, yaml.Unmarshal(must(os.ReadFile(file))(t), &compose))
		for name, s := range compose.Services {
			for k := range s.Environment {
				if secret.MatchString(k) {
					t.Errorf("%s: %s sets %s itself; give it as %s_FILE, a compose secret", file, name, k, k)
				}
			}
		}
	}

	ops := string(must(os.ReadFile("../docs/operations.md"))(t))
	start := strings.Index(ops, "\n### Docker Compose\n")
	if start < 0 {
		t.Fatal("docs/operations.md has no section Docker Compose")
	}
	section := ops[start+1:]
	if end := strings.Index(section, "\n### "); end >= 0 {
		section = section[:end]
	}
	// A secret read onto a command line: $(cat deploy/secrets/...), or -e NAME=value for a secret.
	onCommandLine := regexp.MustCompile(`\$\(cat [^)]*secrets/|-e [A-Z_]*(TOKEN|KEY|PASSWORD|DATABASE_URL)=`)
	for i, l := range strings.Split(section, "\n") {
		if onCommandLine.MatchString(l) {
			t.Errorf("docs/operations.md, Docker Compose, line %d of the section puts a secret on a command line: %s", i+1, l)
		}
	}
}
