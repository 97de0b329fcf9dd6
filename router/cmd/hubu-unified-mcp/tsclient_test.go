package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/routertest"
)

// The official TypeScript MCP client (Claude Code and the MCP Inspector build on it) checks
// results more strictly than the Go SDK's; the router must satisfy it too. `make test`
// installs it (npm ci in router/testdata/tsclient).
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed; the TypeScript client test needs Node.js 18 or later")
	}
	dir, _ := filepath.Abs("../../testdata/tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatal("run `npm ci` in router/testdata/tsclient (make test does) to install the TypeScript MCP client")
	}
	b := routertest.New(t)
	// One spend fails at the provider, nothing charged: its result carries charged_micros.
	b.SetDecide(func(req hubuapi.AuthorizeRequest) (int, *hubuapi.Operation, *hubuapi.Problem) {
		if req.Arguments.Prompt != "a fox the provider refuses" {
			return http.StatusCreated, routertest.Operation(req, hubuapi.OperationStateExecuting), nil
		}
		op := routertest.Operation(req, hubuapi.OperationStateFailed)
		op.HeldMicros, op.ReleasedMicros = 0, op.AmountMicros
		return http.StatusCreated, op, nil
	})
	cmd := exec.Command(node, filepath.Join(dir, "client.mjs"), binary, b.HubuURL, b.GongbuURL, filepath.Join(t.TempDir(), "r.db"), b.Token)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("the TypeScript client failed: %v\n%s", err, stderr)
	}
	var got struct {
		Tools     []string `json:"tools"`
		Templates []string `json:"templates"`
		Image     struct {
			Contents []struct {
				URI, MimeType, Blob string
			} `json:"contents"`
		} `json:"image"`
		First, Again, NoIdentity, InArguments, Failed, Capabilities, Status, Edit struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
			Content           []struct {
				Type string `json:"type"`
			} `json:"content"`
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.Tools) != 6 {
		t.Fatalf("tools %v", got.Tools)
	}
	// The image is read as a resource by the URI the result names, and an edit of it is a spend.
	uri := "hubu://images/" + fmt.Sprint(got.First.StructuredContent["public_handle"])
	if len(got.Templates) != 1 || got.Templates[0] != "hubu://images/{+handle}" || len(got.Image.Contents) != 1 ||
		got.Image.Contents[0].URI != uri || got.Image.Contents[0].MimeType != "image/png" || got.Image.Contents[0].Blob != base64.StdEncoding.EncodeToString(routertest.TinyPNG()) {
		t.Fatalf("resources: templates %v, read %+v", got.Templates, got.Image.Contents)
	}
	if got.Edit.IsError || got.Edit.StructuredContent["status"] != "succeeded" {
		t.Fatalf("edit_image: %+v", got.Edit)
	}
	if got.First.IsError || got.First.StructuredContent["status"] != "succeeded" || len(got.First.Content) != 2 || got.First.Content[1].Type != "image" {
		t.Fatalf("first: %+v", got.First)
	}
	if got.Again.StructuredContent["replayed"] != true || got.Again.StructuredContent["public_handle"] != got.First.StructuredContent["public_handle"] {
		t.Fatalf("redelivery: %+v", got.Again)
	}
	for name, r := range map[string]struct {
		isError bool
		code    string
	}{
		"no identity":  {got.NoIdentity.IsError, errorCode(got.NoIdentity.StructuredContent)},
		"in arguments": {got.InArguments.IsError, errorCode(got.InArguments.StructuredContent)},
	} {
		if !r.isError || r.code == "" {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if errorCode(got.NoIdentity.StructuredContent) != "identity_required" || errorCode(got.InArguments.StructuredContent) != "identity_in_arguments" {
		t.Fatalf("codes: %s %s", errorCode(got.NoIdentity.StructuredContent), errorCode(got.InArguments.StructuredContent))
	}
	if got.Failed.IsError || got.Failed.StructuredContent["status"] != "failed" || got.Failed.StructuredContent["charged_micros"] != float64(0) {
		t.Fatalf("failed: %+v", got.Failed)
	}
	if got.Capabilities.IsError || got.Status.IsError {
		t.Fatalf("read-only tools: %+v %+v", got.Capabilities, got.Status)
	}
	if n := b.Calls("authorize"); n != 3 { // the first spend, the failed one and the edit
		t.Fatalf("%d authorizations", n)
	}
}
