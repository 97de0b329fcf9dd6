package main

import (
	"net/http"
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
)

// A value in the environment that does not parse stops the start, quoting it and naming the
// setting (both are read as text and checked after, with one message for the flag and the
// variable); it never falls back to the default.
func TestBadValuesInTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ env, want string }{
		{"MOCKFLUX_PENDING_POLLS=5x", `--pending-polls "5x" is not a whole number of polls (0 or more)`},
		{"MOCKFLUX_SAMPLE_TTL=5x", `--sample-ttl "5x" is not a positive duration such as 10m`},
		{"MOCKFLUX_RENDER_TIME=5x", `--render-time "5x" is not a duration of 0 or more, such as 2s`},
		{"MOCKFLUX_RENDER_TIME=-1s", `--render-time "-1s" is not a duration of 0 or more, such as 2s`},
		{"MOCKFLUX_RENDER_TIME=2", `--render-time "2" is not a duration of 0 or more, such as 2s`},
	} {
		commandtest.Refuses(t, run, []string{c.env, "MOCKFLUX_LISTEN=127.0.0.1:0"}, []string{"serve"}, c.want)
	}
}

// The API key may be given as a file (MOCKFLUX_API_KEY_FILE); MOCKFLUX_API_KEY with it is
// refused; and the key reaches no error, help or log.
func TestAPIKeyFromAFile(t *testing.T) {
	t.Parallel()
	const key = "mockflux-key-not-to-show-4e5f"
	file := commandtest.File(t, key+"\n")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"MOCKFLUX_API_KEY=" + key, "MOCKFLUX_API_KEY_FILE=" + file}, []string{"serve"}, "MOCKFLUX_API_KEY and MOCKFLUX_API_KEY_FILE are both set: set one"},
		{[]string{"MOCKFLUX_API_KEY_FILE=" + file + ".missing"}, []string{"serve"}, "MOCKFLUX_API_KEY_FILE: open " + file + ".missing: no such file or directory"},
		{[]string{"MOCKFLUX_API_KEY=" + key}, []string{"serve", "--help"}, "flag: help requested"},
	} {
		commandtest.Refuses(t, run, c.env, c.args, c.want, key)
	}

	addr, stop := commandtest.Start(t, run, []string{"MOCKFLUX_API_KEY_FILE=" + file}, "serve", "--listen", "127.0.0.1:0")
	for x, forbidden := range map[string]bool{"wrong": true, key: false} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/get_result?id=none", nil)
		req.Header.Set("x-key", x)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if (resp.StatusCode == http.StatusForbidden) != forbidden {
			t.Errorf("x-key %q: %d", x, resp.StatusCode)
		}
	}
	stop(key)
}
