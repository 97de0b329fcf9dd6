// Command hubuctl is Hubu's operator CLI: it lists and decides approval holds (approvals.go),
// shows operations and their ledgers (operations.go), and manages agents and their policies
// (agents.go), the price catalog (prices.go) and the credentials (credentials.go). It talks
// to Hubu only through the generated client, with an operator (approver) token.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	settings "hubu.dev/hubu/kit/command"
	"hubu.dev/hubu/proto/hubuapi"
)

// usage is hubuctl --help; %s is the list of commands, made from the table below.
const usage = `hubuctl — operator CLI for Hubu

usage: hubuctl [--url URL] [--token TOKEN] [--json] COMMAND [ARGS]

commands:
%s
global flags (accepted anywhere):
  --url URL       Hubu's base URL (env HUBU_URL)
  --token TOKEN   operator (approver) token (env HUBU_APPROVER_TOKEN, or a file named by
                  HUBU_APPROVER_TOKEN_FILE; prefer either to the flag: command lines
                  are visible to other users)
  --json          print the API's JSON response instead of a table

Run 'hubuctl COMMAND --help' for a command's flags, 'hubuctl --version' for the version.
Exit status: 0 done; 1 the API refused or could not be reached; 2 usage or settings error.`

// hubuctl is the command table; each noun's file describes its commands.
var hubuctl = &command{UsageLine: "hubuctl", Commands: []*command{
	approvalsCommand, approveCommand, denyCommand, operationCommand, ledgerCommand, imageCommand,
	agentCommand, pricesCommand, credentialsCommand,
}}

// A command is a word of hubuctl's command line: a group of sub-commands, or a command that
// runs. Its help is made from these fields.
type command struct {
	UsageLine string // name and arguments, after the group's name: "deny HANDLE [--reason TEXT]"
	Listed    string // a shorter usage line for the list in hubuctl --help, where needed
	Short     string // what it does, in that list
	Long      string // help after the usage line(s)
	// Run adds the command's own flags to fs, which holds the global ones, and calls cli.parse.
	Run      func(c *cli, ctx context.Context, fs *flag.FlagSet, args []string) error
	Commands []*command // a group's sub-commands; a group has no Run
}

func (cmd *command) name() string { return strings.Fields(cmd.UsageLine)[0] }

// help is the command's help text; path is the words that ran it, "hubuctl agent create".
func (cmd *command) help(path string) string {
	if cmd.Run != nil {
		return strings.TrimSuffix("usage: "+strings.TrimSuffix(path, cmd.name())+cmd.UsageLine+" [--json]\n\n"+cmd.Long, "\n\n")
	}
	if path == "hubuctl" {
		return fmt.Sprintf(usage, cmd.list(""))
	}
	var lines []string
	for _, sub := range cmd.Commands {
		lines = append(lines, path+" "+sub.UsageLine)
	}
	text := "usage: " + lines[0]
	if len(lines) > 1 {
		text = "usage:\n  " + strings.Join(lines, "\n  ")
	}
	return strings.TrimSuffix(text+"\n\n"+cmd.Long, "\n\n")
}

// list is the command list of hubuctl --help: every command that runs, and what it does.
func (cmd *command) list(prefix string) string {
	var b strings.Builder
	for _, sub := range cmd.Commands {
		if sub.Run == nil {
			b.WriteString(sub.list(prefix + sub.name() + " "))
			continue
		}
		line := fmt.Sprintf("  %-33s  %s", prefix+cmp.Or(sub.Listed, sub.UsageLine), sub.Short)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code(err))
}

// usageError is a mistake in the command line or the settings: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// apiError is a problem+json answer from Hubu: exit status 1.
type apiError struct {
	Status int
	Code   string
	Detail string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Detail }

// code maps run's result to the exit status.
func code(err error) int {
	var u *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	default:
		return 1
	}
}

// run is the whole program; tests call it in-process. It prints its own error line.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if settings.Version("hubuctl", args, stdout) {
		return nil
	}
	c := &cli{getenv: getenv, stdout: stdout, stderr: stderr}
	err := c.run(ctx, hubuctl, "hubuctl", args)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		fmt.Fprintln(stderr, "hubuctl: "+oneLine(err.Error()))
	}
	return err
}

// cli carries the settings shared by every command.
type cli struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer

	url     string
	token   string
	jsonOut bool

	help string // the running command's help, for its --help
}

// errHelp ends a command after its help was printed; run treats it as success.
var errHelp = errors.New("help")

// run runs cmd, which path names. A group parses global flags up to a sub-command's name and
// runs that; `help X` is `X --help`.
func (c *cli) run(ctx context.Context, cmd *command, path string, args []string) error {
	fs := c.flagSet(path)
	if cmd.Run != nil {
		c.help = cmd.help(path)
		return cmd.Run(c, ctx, fs, args)
	}
	if err := fs.Parse(args); err != nil {
		return c.parseError(path, cmd.help(path), err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("missing%s command (see %s --help)", strings.TrimPrefix(path, "hubuctl"), path)
	}
	name, subArgs := rest[0], rest[1:]
	if name == "help" {
		if len(subArgs) == 0 {
			fmt.Fprintln(c.stdout, cmd.help(path))
			return errHelp
		}
		name, subArgs = subArgs[0], append(subArgs[1:], "--help")
	}
	for _, sub := range cmd.Commands {
		if sub.name() == name {
			return c.run(ctx, sub, path+" "+name, subArgs)
		}
	}
	return usagef("unknown command %q (see %s --help)", strings.TrimPrefix(path+" "+name, "hubuctl "), path)
}

// flagSet makes a flag set with the global flags; the caller adds the command's own. The
// global flags are bound to the same fields at every level, so they may appear anywhere.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // usage is printed by us: help to stdout, errors as one line
	fs.Usage = func() {}
	fs.StringVar(&c.url, "url", c.url, "")
	// No default from the environment here: a flag default could end up in printed help.
	fs.StringVar(&c.token, "token", c.token, "")
	fs.BoolVar(&c.jsonOut, "json", c.jsonOut, "")
	return fs
}

func (c *cli) parseError(name, text string, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(c.stdout, text)
		return errHelp
	}
	return usagef("%s: %v (see %s --help)", name, err, name)
}

// parse parses a command's flags, which may come before, between or after its nargs
// positional arguments.
func (c *cli) parse(fs *flag.FlagSet, args []string, nargs int, names string) ([]string, error) {
	return c.parseRange(fs, args, nargs, nargs, names)
}

// parseRange is parse for a command that takes between minArgs and maxArgs positional arguments.
func (c *cli) parseRange(fs *flag.FlagSet, args []string, minArgs, maxArgs int, names string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, c.parseError(fs.Name(), c.help, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) < minArgs || len(pos) > maxArgs {
		if maxArgs == 0 {
			return nil, usagef("%s: unexpected argument %q (see %s --help)", fs.Name(), pos[0], fs.Name())
		}
		return nil, usagef("%s: needs %s (see %s --help)", fs.Name(), names, fs.Name())
	}
	return pos, nil
}

// client checks the settings and returns the generated client. Called after argument
// parsing, so that --help and usage errors need no settings.
func (c *cli) client() (*hubuapi.ClientWithResponses, error) {
	base := c.url
	if base == "" {
		base = c.getenv("HUBU_URL")
	}
	token := c.token
	if token == "" {
		var err error
		if token, err = settings.Secret(c.getenv, "HUBU_APPROVER_TOKEN"); err != nil {
			return nil, usagef("%v", err)
		}
	}
	if base == "" {
		return nil, usagef("HUBU_URL (or --url) is required, e.g. http://127.0.0.1:8081")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef("HUBU_URL (or --url) must be an http:// or https:// URL such as http://127.0.0.1:8081")
	}
	if token == "" {
		return nil, usagef("HUBU_APPROVER_TOKEN (or --token) is required")
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, usagef("HUBU_APPROVER_TOKEN (or --token) must not contain spaces or control characters")
	}
	return hubuapi.NewClientWithResponses(base,
		hubuapi.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}),
		hubuapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("User-Agent", "hubuctl")
			return nil
		}))
}

// response is what every generated ...Response has.
type response interface {
	StatusCode() int
	Status() string
	GetBody() []byte
}

// expect returns nil when the call succeeded with the body the command needs (body picks it
// from the generated response), else the error to report: Hubu's problem details where it
// sent them. The problem is read from the raw body so that a status the spec does not list
// for an operation (a 404 from a proxy, a 503) is still reported by its code.
func expect[R response, T any](resp R, err error, body func(R) *T) error {
	if err != nil {
		return fmt.Errorf("request to Hubu failed: %w", err)
	}
	if body(resp) != nil && resp.StatusCode()/100 == 2 {
		return nil
	}
	var p hubuapi.Problem
	if json.Unmarshal(resp.GetBody(), &p) == nil && p.Code != "" {
		detail := p.Title
		if p.Detail != nil && *p.Detail != "" {
			detail = *p.Detail
		}
		return &apiError{Status: resp.StatusCode(), Code: string(p.Code), Detail: detail}
	}
	return fmt.Errorf("unexpected response from Hubu: %s", resp.Status())
}

// show prints a successful answer: its body as JSON under --json, else what write makes of
// the part body picks.
func show[R response, T any](c *cli, resp R, err error, body func(R) *T, write func(*T) error) error {
	if err := expect(resp, err, body); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(resp.GetBody())
	}
	return write(body(resp))
}

// handleArg parses a command whose one argument is a public handle.
func (c *cli) handleArg(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := c.parse(fs, args, 1, "one public handle")
	if err != nil {
		return "", err
	}
	return parseHandle(pos[0])
}

// idArg parses a command whose one argument is an ID, which parse checks.
func (c *cli) idArg(fs *flag.FlagSet, args []string, names string, parse func(cmd, s string) (uuid.UUID, error)) (uuid.UUID, error) {
	pos, err := c.parse(fs, args, 1, names)
	if err != nil {
		return uuid.UUID{}, err
	}
	return parse(fs.Name(), pos[0])
}

// printToken ends the output of a command that made a token, which Hubu shows only once.
func printToken(w io.Writer, token string) {
	fmt.Fprintf(w, "\nToken: %s\n", token)
	fmt.Fprintln(w, "This token will not be shown again: store it now (Hubu keeps only its hash).")
}

// printJSON writes an API response body indented, for --json.
func (c *cli) printJSON(body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		return fmt.Errorf("the response body is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := c.stdout.Write(buf.Bytes())
	return err
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
