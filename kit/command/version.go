package command

import (
	"fmt"
	"io"

	"hubu.dev/hubu/kit/buildinfo"
)

// Version answers a request for the binary's version: --version, -version or version as the
// only argument. It prints name's version line (buildinfo.Info.Line) to stdout and reports
// true; given anything else it prints nothing and reports false. Only the sole argument
// counts, so that `hubu migrate version` stays the migration's own command.
func Version(name string, args []string, stdout io.Writer) bool {
	if len(args) != 1 {
		return false
	}
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, buildinfo.Read().Line(name))
		return true
	}
	return false
}
