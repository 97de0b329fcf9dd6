package mcpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/router/identity"
)

// MetaShape is the shape of one _meta key: never its value.
type MetaShape struct {
	Key    string   `json:"key"`
	Type   string   `json:"type"`           // string, number, boolean, null, object, array
	Length int      `json:"length"`         // bytes of a string, members of an object or array
	SHA256 string   `json:"sha256_8"`       // the first 8 hex digits of the value's SHA-256
	Keys   []string `json:"keys,omitempty"` // an object's member names
}

// DiagnoseLine is one line of --diagnose-meta output.
type DiagnoseLine struct {
	Time    time.Time   `json:"time"`
	Tool    string      `json:"tool"`
	Meta    []MetaShape `json:"meta"`
	Verdict string      `json:"verdict"` // accepted:<platform>, or the identity error code
}

// Shape describes a _meta map without revealing any value.
func Shape(meta map[string]any) []MetaShape {
	out := make([]MetaShape, 0, len(meta))
	for k, v := range meta {
		s := MetaShape{Key: k}
		var raw []byte
		switch x := v.(type) {
		case string:
			s.Type, s.Length, raw = "string", len(x), []byte(x)
		case float64, json.Number:
			s.Type = "number"
		case bool:
			s.Type = "boolean"
		case nil:
			s.Type = "null"
		case []any:
			s.Type, s.Length = "array", len(x)
		case map[string]any:
			s.Type, s.Length, s.Keys = "object", len(x), slices.Sorted(maps.Keys(x))
		default:
			s.Type = "unknown"
		}
		if raw == nil {
			raw, _ = json.Marshal(v)
		}
		sum := sha256.Sum256(raw)
		s.SHA256 = hex.EncodeToString(sum[:4])
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b MetaShape) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// diagnose writes the call's _meta shape when --diagnose-meta is on. It runs after the
// decision and never changes it; verdict is empty for tools that need no identity, and is
// then what a spend with this _meta would get.
func (r *Router) diagnose(req *mcp.CallToolRequest, verdict string) {
	if r.cfg.Diagnose == nil {
		return
	}
	meta := metaOf(req)
	if verdict == "" {
		if id, err := identity.Normalize(meta, r.cfg.Identity); err == nil {
			verdict = "accepted:" + id.Platform
		} else {
			verdict, _ = identity.DescribeError(err)
		}
	}
	line := DiagnoseLine{Time: r.cfg.Now().UTC(), Verdict: verdict, Meta: Shape(meta)}
	if req.Params != nil {
		line.Tool = req.Params.Name
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	r.diagMu.Lock()
	defer r.diagMu.Unlock()
	_, _ = r.cfg.Diagnose.Write(append(b, '\n'))
}
