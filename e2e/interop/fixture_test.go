package interop_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The support matrix (docs/support-matrix.md) is made from the fixtures in
// router/testdata/meta/. Each harness run here measures one: a header naming the client and the
// harness version (its "tested" field, which makes the row "tested here"), then the router's
// --diagnose-meta lines of the run, as written (key names, types, lengths, 8-hex digests; no
// value). With HUBU_INTEROP_UPDATE=1 (`make interop UPDATE=1`) the run rewrites its fixture;
// otherwise it requires the committed fixture to be of this harness version and of the shape
// this run measured, so the matrix cannot claim a version or a shape that was not tested.

const metaFixtures = "../../router/testdata/meta"

// fixture is the support-matrix fixture of one harness.
type fixture struct {
	File   string // base name under router/testdata/meta
	Client string // the matrix row
	Pkg    string // the harness's npm package
	Note   string
}

type fixtureHeader struct {
	Client string `json:"client"`
	Note   string `json:"note,omitempty"`
	Tested string `json:"tested"`
	// Auth is how the client reaches the router: both harnesses launch it over stdio.
	Auth string `json:"auth,omitempty"`
}

// installedVersion is the version of pkg that npm ci installed in harnesses/.
func installedVersion(pkg string) (string, error) {
	b, err := os.ReadFile(filepath.Join("harnesses", "node_modules", filepath.FromSlash(pkg), "package.json"))
	if err != nil {
		return "", err
	}
	var p struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Version == "" {
		return "", fmt.Errorf("%s: no version in its package.json: %v", pkg, err)
	}
	return p.Version, nil
}

// requireFixture writes (HUBU_INTEROP_UPDATE=1) or checks the harness's fixture against this run.
func (st *interopStack) requireFixture(f fixture) {
	t := st.t
	t.Helper()
	version, err := installedVersion(f.Pkg)
	noError(t, err)
	tested := f.Pkg + "@" + version
	log, err := os.ReadFile(st.metaLog)
	noError(t, err)
	header, _ := json.Marshal(fixtureHeader{Client: f.Client, Note: f.Note, Tested: tested, Auth: "stdio"})
	measured := append(append(header, '\n'), log...)
	path := filepath.Join(metaFixtures, f.File)
	if os.Getenv("HUBU_INTEROP_UPDATE") == "1" {
		noError(t, os.WriteFile(path, measured, 0o644))
		t.Logf("wrote %s (%s); regenerate docs/support-matrix.md (make interop UPDATE=1 does)", path, tested)
		return
	}
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `make interop UPDATE=1` to measure it", err)
	}
	gotHeader, gotShape := shapeOf(t, f.File, committed)
	_, wantShape := shapeOf(t, "this run", measured)
	var h fixtureHeader
	if err := json.Unmarshal(gotHeader, &h); err != nil || h.Tested != tested || h.Client != f.Client || h.Note != f.Note {
		t.Fatalf("router/testdata/meta/%s names %s (%q), this run tested %s (%q): run `make interop UPDATE=1` and commit the fixture and docs/support-matrix.md",
			f.File, h.Tested, h.Client, tested, f.Client)
	}
	if !slices.Equal(gotShape, wantShape) {
		t.Fatalf("router/testdata/meta/%s is not the _meta %s sends: run `make interop UPDATE=1` and commit the fixture and docs/support-matrix.md\ncommitted:\n\t%s\nmeasured:\n\t%s",
			f.File, tested, strings.Join(gotShape, "\n\t"), strings.Join(wantShape, "\n\t"))
	}
}

// shapeOf splits a fixture into its header line and, per diagnose line, what does not change
// from run to run: the tool, the verdict, and each key's name, type and object members.
// Lengths and digests of ids change with every run and are left out.
func shapeOf(t *testing.T, name string, b []byte) (header []byte, shape []string) {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	for _, raw := range lines[1:] {
		var d struct {
			Tool string `json:"tool"`
			Meta []struct {
				Key  string   `json:"key"`
				Type string   `json:"type"`
				Keys []string `json:"keys"`
			} `json:"meta"`
			Verdict string `json:"verdict"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		keys := make([]string, len(d.Meta))
		for i, m := range d.Meta {
			keys[i] = m.Key + ":" + m.Type
			if len(m.Keys) > 0 {
				keys[i] += "{" + strings.Join(m.Keys, ",") + "}"
			}
		}
		shape = append(shape, fmt.Sprintf("%s %s %s", d.Tool, d.Verdict, strings.Join(keys, " ")))
	}
	return lines[0], shape
}
