// Command hubu-loadtest is `make loadtest`: it measures the spend path through the router
// and Hubu's API directly, against a stack of its own (package hubu.dev/hubu/e2e/loadtest),
// or with --stack through a stack make up runs, and prints every figure beside its target. Exit status: 0 the run was made and every
// spend went right (whatever the timings); 1 a spend went wrong (an error, or charges that
// do not match the spends) or the run could not be made; 2 a usage or settings error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"hubu.dev/hubu/e2e/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := loadtest.ParseArgs(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "hubu-loadtest:", err)
		return 2
	}
	cfg.Progress = stderr
	rep, err := loadtest.Run(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "hubu-loadtest:", err)
		return 1
	}
	if rep.Failed() {
		return 1
	}
	return 0
}
