package buildinfo

import (
	"runtime/debug"
	"testing"
)

func build(mainVersion string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "hubu.dev/hubu/services/hubu", Version: mainVersion}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

const rev = "9af7ffaca53d4bd11b6964fa61c206924f15b2fd"

func TestFromBuild(t *testing.T) {
	t.Parallel()
	vcs := []string{"vcs", "git", "vcs.revision", rev, "vcs.time", "2026-12-01T19:27:10Z", "vcs.modified", "true"}
	release := linked{version: "0.1.0", commit: "0123456789abcdef0123456789abcdef01234567", date: "2026-11-30T08:00:00Z", modified: "false"}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		l    linked
		want string
	}{
		{"a workspace build in a checkout", build("(devel)", vcs...), linked{},
			"hubu devel (commit 9af7ffaca53d, 2026-12-01T19:27:10Z, modified, go1.26.8)"},
		{"a workspace build without vcs stamping", build("(devel)"), linked{},
			"hubu devel (commit unknown, go1.26.8)"},
		{"a release without vcs stamping", build("(devel)"), release,
			"hubu 0.1.0 (commit 0123456789ab, 2026-11-30T08:00:00Z, go1.26.8)"},
		{"a release where Go stamped the tree too: Go's record of the tree wins", build("(devel)", vcs...), release,
			"hubu 0.1.0 (commit 9af7ffaca53d, 2026-12-01T19:27:10Z, modified, go1.26.8)"},
		{"go install module@version", build("v0.1.0"), linked{},
			"hubu v0.1.0 (commit unknown, go1.26.8)"},
		{"the linker's version wins over the module's", build("v0.0.0-20261201192710-9af7ffaca53d"), linked{version: "0.1.0"},
			"hubu 0.1.0 (commit unknown, go1.26.8)"},
		{"a clean tree", build("(devel)", "vcs.revision", rev, "vcs.time", "2026-12-01T19:27:10Z", "vcs.modified", "false"), linked{},
			"hubu devel (commit 9af7ffaca53d, 2026-12-01T19:27:10Z, go1.26.8)"},
		{"a linked modified mark", build("(devel)"), linked{commit: "abc1234", modified: "true"},
			"hubu devel (commit abc1234, modified, go1.26.8)"},
		{"no build information at all", nil, linked{},
			"hubu devel (commit unknown)"},
	} {
		if got := fromBuild(c.bi, c.l).Line("hubu"); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestFromBuildKeepsTheFullCommit(t *testing.T) {
	t.Parallel()
	if got := fromBuild(build("(devel)", "vcs.revision", rev), linked{}).Commit; got != rev {
		t.Fatalf("commit %q, want %q", got, rev)
	}
}

// A test binary has build information too; Read must not lose the toolchain's version.
func TestReadInATestBinary(t *testing.T) {
	t.Parallel()
	info := Read()
	if info.GoVersion == "" || info.Version == "" {
		t.Fatalf("Read() = %+v", info)
	}
}
