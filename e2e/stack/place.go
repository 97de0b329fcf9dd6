package stack

import (
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
)

// Place is where `make up` keeps one stack: its state directory (stack.env, stack.pid, the
// router's registry, mockflux's journal, the credentials, the logs) and its databases. The
// default stack (no name) is the one docs/design.md describes: .hubu/, databases hubu and gongbu.
// A named stack has .hubu/stacks/NAME/ and databases hubu_NAME and gongbu_NAME, so two stacks
// on one Postgres server share no database and no file.
type Place struct {
	Name             string // "" for the default stack
	Dir              string
	HubuDB, GongbuDB string
}

// PlaceOf is the place of the stack called name (HUBU_STACK_NAME, or make's NAME) in the
// checkout at root.
func PlaceOf(root, name string) (Place, error) {
	if name == "" {
		return Place{Dir: filepath.Join(root, ".hubu"), HubuDB: "hubu", GongbuDB: "gongbu"}, nil
	}
	// The name becomes part of a database name and of a path: nothing there may need quoting
	// or climb out of .hubu/stacks/.
	if !validName.MatchString(name) {
		return Place{}, fmt.Errorf("stack name %q: use 1 to 40 lower-case letters, digits and underscores", name)
	}
	return Place{Name: name, Dir: filepath.Join(root, ".hubu", "stacks", name), HubuDB: "hubu_" + name, GongbuDB: "gongbu_" + name}, nil
}

var validName = regexp.MustCompile(`^[a-z0-9_]{1,40}$`)

// EnvPath is the stack's env file, written once every part is healthy and removed when it stops.
func (p Place) EnvPath() string { return filepath.Join(p.Dir, "stack.env") }

// PIDPath holds the process id of the running `make up`, which `make down` signals.
func (p Place) PIDPath() string { return filepath.Join(p.Dir, "stack.pid") }

// Flag is how make's command line names this stack ("" or " NAME=x"), for the lines we print.
func (p Place) Flag() string {
	if p.Name == "" {
		return ""
	}
	return " NAME=" + p.Name
}

// GoServices are the stack's processes that are Go programs with a scheduler of their own.
var GoServices = []string{"router", "hubu", "gongbu", "mockflux"}

// SharedProcs is the GOMAXPROCS that shares the machine's cores evenly among GoServices, at
// least one each. Left at Go's default, each of them runs as many schedulers as the machine has
// cores, and on a small machine they spin looking for work the others are doing: on 2 cores a
// round of the load test's latency scenario cost about a third more CPU that way
// (docs/performance.md). A container's CPU limit does not get there on its own: Go rounds a
// limit below 2 up to 2.
func SharedProcs() int { return max(1, runtime.NumCPU()/len(GoServices)) }

// ProcsEnv gives each of GoServices GOMAXPROCS=procs, for Config.Env.
func ProcsEnv(procs int) map[string][]string {
	env := make(map[string][]string, len(GoServices))
	for _, name := range GoServices {
		env[name] = []string{"GOMAXPROCS=" + strconv.Itoa(procs)}
	}
	return env
}
