package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"hubu.dev/hubu/router/supportmatrix"
)

const supportMatrixUsage = `usage: hubu-unified-mcp support-matrix FILE...
Reads --diagnose-meta logs or fixtures (one client per file) and prints the client support matrix
as Markdown. Each verdict is the router's own decision for the recorded _meta shape; a recorded
verdict that differs is flagged in the table and on stderr.`

// supportMatrix prints the Markdown support matrix of the given --diagnose-meta logs.
func supportMatrix(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hubu-unified-mcp support-matrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, supportMatrixUsage) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("support-matrix needs at least one --diagnose-meta log")
	}
	logs := make([]supportmatrix.Log, 0, fs.NArg())
	for _, path := range fs.Args() {
		log, err := supportmatrix.ReadFile(path)
		if err != nil {
			return fmt.Errorf("support-matrix: %v", err)
		}
		logs = append(logs, log)
	}
	rows := supportmatrix.Build(logs)
	for _, r := range rows {
		for _, d := range r.Disagreements {
			fmt.Fprintf(stderr, "support-matrix: %s: %s\n", r.Client, d)
		}
	}
	return supportmatrix.Render(stdout, rows)
}
