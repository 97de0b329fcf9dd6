package supportmatrix

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"hubu.dev/hubu/router/mcpserver"
)

// Log is the --diagnose-meta lines of one client.
//
// A fixture is a JSON-lines file whose first line names the client, e.g.
//
//	{"client":"Codex (desktop)","note":"optional text shown under the table"}
//
// and, for a log measured here by running the harness itself (`make interop`), the harness
// and its version: {"client":"Codex CLI (codex exec)","tested":"@openai/codex@0.171.0"}. A
// fixture without "tested" is reported: a shape described to us, not one we measured. "auth"
// says how the client reaches the router: "stdio", or for a remote client whether its own
// documentation says it implements the MCP authorization specification (a router in OAuth
// mode needs that); it is a statement about the client, not something this log shows.
//
// followed by diagnose lines exactly as the router writes them. A log without that line (the
// router's own output) is named after its file, without directory and extension. The router's
// slog lines, which share stderr with the diagnose lines when --diagnose-meta has no FILE, and
// blank lines are skipped.
type Log struct {
	Client string // the client's name
	Note   string // from the header line, may be empty
	Tested string // the harness and version that made this log here, empty if reported
	Auth   string // how the client reaches the router, from the header line; may be empty
	File   string // the file's base name
	Lines  []Line
}

// Line is one diagnose line and where it was.
type Line struct {
	Number int // 1-based line number in its file
	mcpserver.DiagnoseLine
}

// header is the optional first line of a fixture.
type header struct {
	Client string `json:"client"`
	Note   string `json:"note,omitempty"`
	Tested string `json:"tested,omitempty"`
	Auth   string `json:"auth,omitempty"`
}

// maxLine bounds one line; a _meta shape is small, a longer line is not a diagnose line.
const maxLine = 1 << 20

// ReadFile reads one log or fixture file.
func ReadFile(path string) (Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return Log{}, err
	}
	defer f.Close()
	return Read(filepath.Base(path), f)
}

// Read reads one log or fixture; file is its base name, used in messages and as the client's
// name when it has no header line. It fails on a line that is neither blank, a slog line, a
// header (first line only) nor a well-formed diagnose line, and on a log without diagnose lines.
func Read(file string, r io.Reader) (Log, error) {
	log := Log{File: file, Client: strings.TrimSuffix(file, filepath.Ext(file))}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	seenLine := false
	for n := 1; sc.Scan(); n++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			return Log{}, fmt.Errorf("%s:%d: not a JSON object: %v", file, n, err)
		}
		_, hasMsg := probe["msg"]
		_, hasLevel := probe["level"]
		_, hasClient := probe["client"]
		switch {
		case hasMsg && hasLevel:
			continue // a slog line of the router
		case hasClient:
			if seenLine {
				return Log{}, fmt.Errorf("%s:%d: a client line must be the file's first line", file, n)
			}
			var h header
			if err := decodeStrict(raw, &h); err != nil {
				return Log{}, fmt.Errorf("%s:%d: client line: %v", file, n, err)
			}
			if strings.TrimSpace(h.Client) == "" || strings.ContainsAny(h.Client+h.Note+h.Tested+h.Auth, "\n\r") {
				return Log{}, fmt.Errorf("%s:%d: client line: client must be non-empty, and client, note, tested and auth on one line", file, n)
			}
			log.Client, log.Note, log.Tested, log.Auth = h.Client, h.Note, h.Tested, h.Auth
		default:
			var d mcpserver.DiagnoseLine
			if err := decodeStrict(raw, &d); err != nil {
				return Log{}, fmt.Errorf("%s:%d: not a diagnose line: %v", file, n, err)
			}
			if err := checkShapes(d.Meta); err != nil {
				return Log{}, fmt.Errorf("%s:%d: %v", file, n, err)
			}
			log.Lines = append(log.Lines, Line{Number: n, DiagnoseLine: d})
		}
		seenLine = true
	}
	if err := sc.Err(); err != nil {
		return Log{}, fmt.Errorf("%s: %v", file, err)
	}
	if len(log.Lines) == 0 {
		return Log{}, fmt.Errorf("%s: no --diagnose-meta lines", file)
	}
	return log, nil
}

// decodeStrict decodes one JSON value with no unknown fields and nothing after it.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// checkShapes refuses shapes that mcpserver.Shape cannot have written, so that Synthesize can
// rebuild every shape it is given.
func checkShapes(meta []mcpserver.MetaShape) error {
	seen := make(map[string]bool, len(meta))
	for _, s := range meta {
		if seen[s.Key] {
			return fmt.Errorf("_meta key %q appears twice", s.Key)
		}
		seen[s.Key] = true
		if s.Length < 0 {
			return fmt.Errorf("_meta key %q: negative length", s.Key)
		}
		switch s.Type {
		case "string", "array":
		case "number", "boolean", "null":
			if s.Length != 0 {
				return fmt.Errorf("_meta key %q: a %s has no length", s.Key, s.Type)
			}
		case "object":
			if s.Length != len(s.Keys) {
				return fmt.Errorf("_meta key %q: an object of %d members lists %d member names", s.Key, s.Length, len(s.Keys))
			}
			members := make(map[string]bool, len(s.Keys))
			for _, k := range s.Keys {
				if members[k] {
					return fmt.Errorf("_meta key %q: member %q appears twice", s.Key, k)
				}
				members[k] = true
			}
		default:
			return fmt.Errorf("_meta key %q: type %q is not a JSON type the shape can be rebuilt from", s.Key, s.Type)
		}
		if s.Type != "object" && len(s.Keys) > 0 {
			return fmt.Errorf("_meta key %q: a %s has no member names", s.Key, s.Type)
		}
	}
	return nil
}
