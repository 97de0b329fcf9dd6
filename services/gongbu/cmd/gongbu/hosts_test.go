package main

import (
	"strings"
	"testing"
)

// The FLUX host allow-lists are read before anything is started: a bad entry is named, and
// the settings are in the usage.
func TestFluxHostSettings(t *testing.T) {
	t.Parallel()
	env := append([]string{"GONGBU_DATABASE_URL=postgres://127.0.0.1:1/gongbu"}, serveEnv...)
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{env, []string{"serve", "--flux-polling-hosts", "api.us1.bfl.ai,https://api.eu1.bfl.ai"}, `--flux-polling-hosts: "https://api.eu1.bfl.ai" is not a host`},
		{append(env, "GONGBU_FLUX_POLLING_HOSTS=*.bfl.ai"), []string{"serve"}, `--flux-polling-hosts: "*.bfl.ai" is not a host`},
		{append(env, "GONGBU_FLUX_SAMPLE_HOSTS=delivery-us1.bfl.ai/results"), []string{"serve"}, `--flux-sample-hosts: "delivery-us1.bfl.ai/results" is not a host`},
	} {
		_, _, err := runGongbu(t, c.env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want it to say %q", c.args, err, c.want)
		}
	}
	out, _, _ := runGongbu(t, nil, "--help")
	_, flags, _ := runGongbu(t, nil, "serve", "--help")
	for _, want := range []string{"--flux-polling-hosts", "--flux-sample-hosts", "GONGBU_FLUX_POLLING_HOSTS", "GONGBU_FLUX_SAMPLE_HOSTS"} {
		if !strings.Contains(out, want) {
			t.Errorf("the usage does not name %s", want)
		}
		if !strings.Contains(flags, strings.TrimPrefix(want, "-")) {
			t.Errorf("serve --help does not name %s", want)
		}
	}
}
