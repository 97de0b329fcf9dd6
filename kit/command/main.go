package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Main runs run with the process's arguments, environment and output until SIGINT or SIGTERM.
// When it fails it prints "name: " and the error and exits 2; asking for help is no failure.
// Asked for the version (see Version), it prints it without calling run.
func Main(name string, run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error) {
	if Version(name, os.Args[1:], os.Stdout) {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
}

// Commands runs a subcommand, by its name, with the arguments after the name.
type Commands map[string]func(args []string) error

// Dispatch runs the subcommand args[0] names. help, -h and --help print usage to stdout; no
// subcommand or an unknown one prints it to stderr and is an error.
func Dispatch(args []string, usage string, stdout, stderr io.Writer, commands Commands) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errors.New("missing command")
	}
	switch cmd := args[0]; {
	case commands[cmd] != nil:
		return commands[cmd](args[1:])
	case cmd == "-h" || cmd == "--help" || cmd == "help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// OneLine is err (nil stays nil) on one line, whatever a dependency put in its message: the
// database driver's connection errors span lines.
func OneLine(err error) error {
	if err == nil {
		return nil
	}
	return oneLineError{err}
}

type oneLineError struct{ err error }

func (e oneLineError) Error() string { return strings.Join(strings.Fields(e.err.Error()), " ") }
func (e oneLineError) Unwrap() error { return e.err }
