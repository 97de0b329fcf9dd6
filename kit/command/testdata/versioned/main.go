// Command versioned is a program built by TestMainAnswersVersion: command.Main around a run
// that prints its arguments, so the test sees which calls reach run.
package main

import (
	"context"
	"fmt"
	"io"

	"hubu.dev/hubu/kit/command"
)

func main() {
	command.Main("versioned", func(_ context.Context, args []string, _ func(string) string, stdout, _ io.Writer) error {
		fmt.Fprintf(stdout, "run %q\n", args)
		return nil
	})
}
