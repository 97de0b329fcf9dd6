package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/router/routertest"
)

// The router downloads no image from a private address unless told to: the fake serves its
// images on loopback, as make up's mockflux does.
func TestAllowPrivateImageHosts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		args     []string
		env      string
		embedded bool
	}{
		{"by default", nil, "", false},
		{"with the flag", []string{"--allow-private-image-hosts"}, "", true},
		{"with the environment", nil, "ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS=true", true},
		{"with the flag turning the environment off", []string{"--allow-private-image-hosts=false"}, "ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS=1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := routertest.New(t)
			b.SetKept(nil) // Gongbu keeps no image: the router downloads the provider's link
			cmd := routerCmd(b, filepath.Join(t.TempDir(), "r.db"), c.args...)
			if c.env != "" {
				cmd.Env = append(cmd.Env, c.env)
			}
			cs, logs := connect(t, cmd)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate_image", Arguments: json.RawMessage(fox),
				Meta: map[string]any{"callId": "call_image1dvEjMnpZ63M8Iqv7zy"}})
			if err != nil {
				t.Fatal(err)
			}
			embedded := false
			for _, content := range res.Content {
				_, isImage := content.(*mcp.ImageContent)
				embedded = embedded || isImage
			}
			if res.IsError || embedded != c.embedded {
				t.Fatalf("isError %v, image embedded %v, want %v", res.IsError, embedded, c.embedded)
			}
			if !c.embedded && b.Calls("image") != 0 {
				t.Fatalf("the image host on loopback got %d requests", b.Calls("image"))
			}
			cs.Close() // the router exits, and its log is complete
			if !c.embedded && !strings.Contains(logs.String(), "image download refused") {
				t.Fatalf("the refusal is not logged:\n%s", logs.String())
			}
		})
	}
	cmd := exec.Command(binary, "--hubu-url", "http://x", "--gongbu-url", "http://x", "--state", filepath.Join(t.TempDir(), "r.db"))
	cmd.Env = []string{"HUBU_AGENT_TOKEN=t", "ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS=maybe"}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS must be true or false, not \"maybe\"") {
		t.Fatalf("a bad ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS: %v %s", err, out)
	}
	if out, err := exec.Command(binary, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "-allow-private-image-hosts") ||
		!strings.Contains(string(out), "ROUTER_ALLOW_PRIVATE_IMAGE_HOSTS") {
		t.Fatalf("--help does not name the setting: %v %s", err, out)
	}
}
