// Package buildinfo says which build of Hubu a binary is: its version, the commit it was built
// from, that commit's time, and whether the work tree had changes that were not committed.
//
// Go records the commit itself when it builds in a git checkout (-buildvcs, on by default
// where git is installed, though a GOFLAGS=-buildvcs=false in the go env turns it off), but in
// a workspace (go.work) it records no module version, and without .git (a source archive) no
// commit either. A build supplies what Go cannot with -ldflags, as the release does
// (.goreleaser.yaml):
//
//	-X hubu.dev/hubu/kit/buildinfo.version=0.1.0
//	-X hubu.dev/hubu/kit/buildinfo.commit=9af7ffaca53d4bd11b6964fa61c206924f15b2fd
//	-X hubu.dev/hubu/kit/buildinfo.date=2026-12-01T19:27:10Z   (the commit's time, RFC 3339)
//	-X hubu.dev/hubu/kit/buildinfo.modified=false
package buildinfo

import (
	"runtime/debug"
	"strconv"
	"strings"
)

// Set by the linker (-ldflags -X); empty when the build set nothing.
var (
	version  string
	commit   string
	date     string
	modified string
)

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the release's version, or the module's when Go recorded one (go install
	// module@version); "devel" when neither is known.
	Version string
	// Commit is the full revision; empty when unknown.
	Commit string
	// Time is the commit's time, RFC 3339; empty when unknown.
	Time string
	// Modified is whether the tree had uncommitted changes when it was built.
	Modified bool
	// GoVersion is the toolchain that built the binary, such as go1.26.8.
	GoVersion string
}

// Read returns this binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo() // nil only in a binary built without module support
	return fromBuild(bi, linked{version: version, commit: commit, date: date, modified: modified})
}

// linked is the values set with -ldflags -X.
type linked struct{ version, commit, date, modified string }

// fromBuild merges what Go recorded (bi, which may be nil) with what the linker set. For the
// commit, its time and the modified mark, Go's record wins: the toolchain read them from the
// tree it compiled, so they cannot drift from it. For the version the linker's value wins:
// it is the name a release gives, which Go cannot know in a workspace.
func fromBuild(bi *debug.BuildInfo, l linked) Info {
	info := Info{Version: l.version, Commit: l.commit, Time: l.date}
	info.Modified, _ = strconv.ParseBool(l.modified) // empty or malformed: not known to be modified
	if bi == nil {
		if info.Version == "" {
			info.Version = "devel"
		}
		return info
	}
	info.GoVersion = bi.GoVersion
	if info.Version == "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	if rev := vcs["vcs.revision"]; rev != "" {
		info.Commit, info.Time = rev, vcs["vcs.time"]
		info.Modified = vcs["vcs.modified"] == "true"
	}
	return info
}

// Line is the one line that `name --version` prints:
//
//	hubu 0.1.0 (commit 9af7ffaca53d, 2026-12-01T19:27:10Z, modified, go1.26.8)
//
// The commit is shortened to 12 characters, as in Go's pseudo-versions; parts not known are
// left out, and an unknown commit is said to be.
func (i Info) Line(name string) string {
	var parts []string
	switch {
	case i.Commit == "":
		parts = append(parts, "commit unknown")
	case len(i.Commit) > 12:
		parts = append(parts, "commit "+i.Commit[:12])
	default:
		parts = append(parts, "commit "+i.Commit)
	}
	if i.Time != "" {
		parts = append(parts, i.Time)
	}
	if i.Modified {
		parts = append(parts, "modified")
	}
	if i.GoVersion != "" {
		parts = append(parts, i.GoVersion)
	}
	return name + " " + i.Version + " (" + strings.Join(parts, ", ") + ")"
}
