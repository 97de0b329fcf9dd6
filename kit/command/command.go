// Package command is what the binaries' mains share: flags that fall back to environment
// variables (secrets also to a file), and an HTTP server with one set of limits and a
// bounded graceful shutdown.
package command

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

// FlagSet is a command's flags, each declared once with the environment variable it falls
// back to ("" for none). A flag given on the command line wins; an empty variable counts as
// unset. The variable is read by Parse, not at declaration, so no value from the
// environment (a secret among them) is shown as a default in the help.
type FlagSet struct {
	*flag.FlagSet
	getenv func(string) string
	envs   []fallback
}

type fallback struct {
	flag, env string
	secret    bool
}

// NewFlagSet returns an empty flag set that reports to stderr.
func NewFlagSet(name string, getenv func(string) string, stderr io.Writer) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &FlagSet{FlagSet: fs, getenv: getenv}
}

func (fs *FlagSet) fallBack(name, env string, secret bool, usage string) string {
	if env == "" {
		return usage
	}
	fs.envs = append(fs.envs, fallback{name, env, secret})
	if secret {
		return fmt.Sprintf("%s (env %s or %s_FILE)", usage, env, env)
	}
	return fmt.Sprintf("%s (env %s)", usage, env)
}

func (fs *FlagSet) String(name, env, def, usage string) *string {
	return fs.FlagSet.String(name, def, fs.fallBack(name, env, false, usage))
}

// Secret is a string flag whose variable may instead name a file holding the value (see
// Secret). Give secrets through the environment: a command line is visible to every user.
func (fs *FlagSet) Secret(name, env, usage string) *string {
	return fs.FlagSet.String(name, "", fs.fallBack(name, env, true, usage))
}

func (fs *FlagSet) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	return fs.FlagSet.Duration(name, def, fs.fallBack(name, env, false, usage))
}

func (fs *FlagSet) Int(name, env string, def int, usage string) *int {
	return fs.FlagSet.Int(name, def, fs.fallBack(name, env, false, usage))
}

func (fs *FlagSet) Bool(name, env string, def bool, usage string) *bool {
	return fs.FlagSet.Bool(name, def, fs.fallBack(name, env, false, usage))
}

// Parse parses args, then sets each flag they did not give from its variable. A variable's
// value that does not parse is an error naming the variable, as a bad flag is: never a
// silent fallback to the default.
func (fs *FlagSet) Parse(args []string) error {
	if err := fs.FlagSet.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, fb := range fs.envs {
		if given[fb.flag] {
			continue
		}
		v := fs.getenv(fb.env)
		if fb.secret {
			var err error
			if v, err = Secret(fs.getenv, fb.env); err != nil {
				return err
			}
		}
		if v == "" {
			continue
		}
		if value := fs.Lookup(fb.flag).Value; value.Set(v) != nil {
			return invalid(fb.env, value, v)
		}
	}
	return nil
}

// ParseNoArgs is Parse for a command that takes flags only: an argument left over is an error.
func (fs *FlagSet) ParseNoArgs(args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func invalid(env string, value flag.Value, v string) error {
	want := "valid"
	switch value.(flag.Getter).Get().(type) { // only the flag package's own values can fail to parse
	case time.Duration:
		want = "a duration such as 90s or 10m"
	case bool:
		want = "true or false"
	case int:
		want = "a whole number"
	}
	return fmt.Errorf("%s must be %s, not %q", env, want, v)
}

// Secret returns the value of the variable name or, when name_FILE is set instead, the
// content of the file it names less one trailing newline (as secret stores mount them).
// Its errors name the variables and the file, never the content.
func Secret(getenv func(string) string, name string) (string, error) {
	v, file := getenv(name), getenv(name+"_FILE")
	switch {
	case file == "":
		return v, nil
	case v != "":
		return "", fmt.Errorf("%s and %s_FILE are both set: set one", name, name)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	return strings.TrimSuffix(s, "\r"), nil
}

// WithSecret returns getenv with name resolved by Secret, for code that reads the
// environment itself.
func WithSecret(getenv func(string) string, name string) (func(string) string, error) {
	v, err := Secret(getenv, name)
	if err != nil {
		return nil, err
	}
	return func(k string) string {
		if k == name {
			return v
		}
		return getenv(k)
	}, nil
}

// RequireHTTPURL checks the base URL setting of flag name.
func RequireHTTPURL(name, v string) error {
	if v == "" {
		return fmt.Errorf("--%s is required", name)
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--%s must be an http(s) URL", name)
	}
	return nil
}
