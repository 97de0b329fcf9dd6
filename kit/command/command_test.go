package command

import (
	"bytes"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/command/commandtest"
)

func envOf(kv ...string) func(string) string { return commandtest.Getenv(kv) }

type settings struct {
	name  *string
	key   *string
	wait  *time.Duration
	count *int
	on    *bool
}

func declare(getenv func(string) string) (*FlagSet, settings, *bytes.Buffer) {
	var out bytes.Buffer
	fs := NewFlagSet("test", getenv, &out)
	return fs, settings{
		name:  fs.String("name", "T_NAME", "anon", "who"),
		key:   fs.Secret("key", "T_KEY", "the key"),
		wait:  fs.Duration("wait", "T_WAIT", 30*time.Second, "how long"),
		count: fs.Int("count", "T_COUNT", 1, "how many"),
		on:    fs.Bool("on", "T_ON", false, "whether"),
	}, &out
}

func TestFlagsFallBackToTheEnvironment(t *testing.T) {
	t.Parallel()
	fs, s, _ := declare(envOf("T_NAME=env", "T_KEY=k", "T_WAIT=5s", "T_COUNT=7", "T_ON=true"))
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if *s.name != "env" || *s.key != "k" || *s.wait != 5*time.Second || *s.count != 7 || !*s.on {
		t.Fatalf("from the environment: %q %q %v %d %v", *s.name, *s.key, *s.wait, *s.count, *s.on)
	}

	// The command line wins, even over a value in the environment that would not parse.
	fs, s, _ = declare(envOf("T_NAME=env", "T_WAIT=soon", "T_COUNT=many", "T_ON=maybe", "T_KEY=k", "T_KEY_FILE=/nonexistent"))
	if err := fs.Parse([]string{"--name", "flag", "--wait", "1m", "--count", "2", "--on=false", "--key", "f"}); err != nil {
		t.Fatal(err)
	}
	if *s.name != "flag" || *s.key != "f" || *s.wait != time.Minute || *s.count != 2 || *s.on {
		t.Fatalf("from the command line: %q %q %v %d %v", *s.name, *s.key, *s.wait, *s.count, *s.on)
	}

	// An empty variable is unset.
	fs, s, _ = declare(envOf("T_NAME=", "T_WAIT="))
	if err := fs.Parse(nil); err != nil || *s.name != "anon" || *s.wait != 30*time.Second {
		t.Fatalf("defaults: %v %q %v", err, *s.name, *s.wait)
	}
}

func TestABadValueInTheEnvironmentIsAnError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ env, want string }{
		{"T_WAIT=5x", `T_WAIT must be a duration such as 90s or 10m, not "5x"`},
		{"T_WAIT=10", `T_WAIT must be a duration such as 90s or 10m, not "10"`},
		{"T_COUNT=many", `T_COUNT must be a whole number, not "many"`},
		{"T_ON=maybe", `T_ON must be true or false, not "maybe"`},
	} {
		fs, _, _ := declare(envOf(c.env))
		if err := fs.Parse(nil); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.env, err, c.want)
		}
	}
}

func TestHelpNamesVariablesAndShowsNoValueFromThem(t *testing.T) {
	t.Parallel()
	fs, _, out := declare(envOf("T_KEY=hunter2", "T_NAME=hunter3"))
	if err := fs.Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{"who (env T_NAME)", "the key (env T_KEY or T_KEY_FILE)", "how long (env T_WAIT)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out.String(), "hunter") {
		t.Errorf("help shows a value from the environment:\n%s", out)
	}
}

func TestSecretFromAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "s3cret-in-a-file"
	for _, c := range []struct {
		name, content, want string
	}{
		{"plain", secret, secret},
		{"one newline", secret + "\n", secret},
		{"crlf", secret + "\r\n", secret},
		{"only one newline", secret + "\n\n", secret + "\n"},
		{"inner whitespace kept", " a b\n", " a b"},
	} {
		got, err := Secret(envOf("T_KEY_FILE="+commandtest.File(t, c.content)), "T_KEY")
		if err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.name, got, err, c.want)
		}
	}

	// Through a flag too.
	fs, s, _ := declare(envOf("T_KEY_FILE=" + commandtest.File(t, secret+"\n")))
	if err := fs.Parse(nil); err != nil || *s.key != secret {
		t.Fatalf("flag from a file: %q %v", *s.key, err)
	}

	file := commandtest.File(t, secret)
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"T_KEY=" + secret, "T_KEY_FILE=" + file}, "T_KEY and T_KEY_FILE are both set: set one"},
		{[]string{"T_KEY_FILE=" + filepath.Join(dir, "missing")}, "T_KEY_FILE: open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{[]string{"T_KEY_FILE=" + dir}, "T_KEY_FILE: read " + dir + ": is a directory"},
	} {
		fs, _, out := declare(envOf(c.env...))
		err := fs.Parse(nil)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.env, err, c.want)
		}
		if err != nil && strings.Contains(err.Error()+out.String(), secret) {
			t.Errorf("%v: the secret is in %q %q", c.env, err, out)
		}
	}
}

func TestWithSecret(t *testing.T) {
	t.Parallel()
	p := commandtest.File(t, "postgres://u:pw@h/db\n")
	getenv, err := WithSecret(envOf("T_URL_FILE="+p, "OTHER=x"), "T_URL")
	if err != nil || getenv("T_URL") != "postgres://u:pw@h/db" || getenv("OTHER") != "x" {
		t.Fatalf("%v", err)
	}
	if _, err := WithSecret(envOf("T_URL=a", "T_URL_FILE="+p), "T_URL"); err == nil {
		t.Fatal("both set: no error")
	}
}

func TestRequireHTTPURL(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{
		"":                   "--u is required",
		"127.0.0.1:8081":     "--u must be an http(s) URL",
		"ftp://host":         "--u must be an http(s) URL",
		"http://":            "--u must be an http(s) URL",
		"http://h:1":         "",
		"https://h.example/": "",
	} {
		err := RequireHTTPURL("u", v)
		if (err == nil) != (want == "") || (err != nil && err.Error() != want) {
			t.Errorf("%q: %v, want %q", v, err, want)
		}
	}
}
