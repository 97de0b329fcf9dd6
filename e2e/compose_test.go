package e2e_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// deploy/compose.yaml is the recipe for BFL's API: Gongbu is told of the provider by its key
// alone, as TestSuiteUnderBFLsHostNames runs it, and nothing in it is mockflux's (which
// deploy/compose.mockflux.yaml adds).
func TestComposeRecipeIsForBFL(t *testing.T) {
	t.Parallel()
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	noError(t, yaml.Unmarshal(must(os.ReadFile("../deploy/compose.yaml"))(t), &compose))
	if _, ok := compose.Services["mockflux"]; ok {
		t.Error("deploy/compose.yaml runs mockflux")
	}
	var provider []string
	for k := range compose.Services["gongbu"].Environment {
		if strings.HasPrefix(k, "GONGBU_FLUX_") || strings.HasPrefix(k, "GONGBU_WEBHOOK_") {
			provider = append(provider, k)
		}
	}
	if slices.Sort(provider); !slices.Equal(provider, []string{"GONGBU_FLUX_KEY_FILE"}) {
		t.Errorf("Gongbu's provider settings are %v, want the key alone", provider)
	}
	for name, s := range compose.Services {
		for k, v := range s.Environment {
			if strings.Contains(v, "mockflux") || k == "ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS" {
				t.Errorf("%s: %s=%s is not for BFL's API", name, k, v)
			}
		}
	}
}
