package e2e_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"

	harness "hubu.dev/hubu/e2e/stack"
)

// Results by reference, end to end: Gongbu downloads the image when mockflux reports the job
// Ready and keeps it; the router embeds it from Gongbu (a router that refuses to download from
// loopback still embeds it, so it cannot have come from the provider's link) and records only
// a reference in its registry; once the provider's link has expired, a redelivery and
// get_execution, through another router, still embed the same image, from Gongbu.
func TestSuiteResultsOutliveTheProvidersLink(t *testing.T) {
	t.Parallel()
	server, id, dir, idConfig := stackPlace(t)
	su := startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_e2e_" + id, GongbuDB: "gongbu_e2e_" + id, FluxIdempotent: true,
		Env: map[string][]string{
			"router":   {"ROUTER_IDENTITY_CONFIG=" + idConfig},
			"mockflux": {"MOCKFLUX_SAMPLE_TTL=1s"},
		},
	})
	cs := su.routerFor(su.s.Credentials.AgentToken, 20*time.Second, []string{"--allow-private-image-hosts=false"})
	const callID = "call_byref7TqLw2Xn9pVd4KzR8sYb"

	first, firstImage := spendImage(t, cs, callID)
	if first["status"] != "succeeded" || firstImage == nil {
		logs, _ := os.ReadFile(su.s.Gongbu.LogPath)
		t.Logf("gongbu log:\n%s", logs)
		t.Fatalf("first delivery: %v, image embedded %v", first, firstImage != nil)
	}
	link, _ := first["result"].(map[string]any)["image_url"].(string)
	noError(t, poll(10*time.Second, 100*time.Millisecond, func() error {
		resp, err := http.Get(link)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			return fmt.Errorf("the provider's link still answers %d", resp.StatusCode)
		}
		return nil
	}))

	// Another router process holds no image in memory: what it embeds comes from Gongbu.
	cs = su.routerFor(su.s.Credentials.AgentToken, 20*time.Second, []string{"--allow-private-image-hosts=false"})
	again, againImage := spendImage(t, cs, callID)
	if again["replayed"] != true || !bytes.Equal(againImage, firstImage) {
		t.Fatalf("redelivery after the link expired: %v, same image %v", again, bytes.Equal(againImage, firstImage))
	}
	res := must(cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_execution",
		Arguments: json.RawMessage(fmt.Sprintf(`{"public_handle":%q}`, first.handle()))}))(t)
	if img := embedded(res); !bytes.Equal(img, firstImage) {
		t.Fatalf("get_execution after the link expired embedded %d bytes, want the image", len(img))
	}

	// Gongbu keeps the image once; the registry keeps a reference to it and no image bytes.
	conn := must(pgx.Connect(context.Background(), su.s.GongbuDBURL))(t)
	defer conn.Close(context.Background())
	var kept, size int
	noError(t, conn.QueryRow(context.Background(), "SELECT count(*), coalesce(max(octet_length(image)), 0) FROM execution_images").Scan(&kept, &size))
	if kept != 1 || size != len(firstImage) {
		t.Fatalf("Gongbu keeps %d images (%d bytes), want the one of %d bytes", kept, size, len(firstImage))
	}
	db := must(sql.Open("sqlite", "file:"+filepath.Join(dir, "router.db")+"?mode=ro"))(t)
	defer db.Close()
	var recorded string
	noError(t, db.QueryRow("SELECT result FROM calls WHERE harness_call_id = ?", callID).Scan(&recorded))
	if len(recorded) > 1<<10 || strings.Contains(recorded, `"image":"`) || !strings.Contains(recorded, `"kept_image"`) {
		t.Fatalf("the registry recorded %d bytes for the call, not a reference: %s", len(recorded), recorded)
	}
	if n := su.charges().Count; n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	su.settleAndReconcile(1)
}

// spendImage delivers a generate_image call and returns its structured content and the image
// it embeds (nil: none).
func spendImage(t *testing.T, cs *mcp.ClientSession, callID string) (result, []byte) {
	t.Helper()
	res := must(cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate_image",
		Arguments: json.RawMessage(foxArgs), Meta: codexMeta(callID)}))(t)
	var r result
	b := must(json.Marshal(res.StructuredContent))(t)
	noError(t, json.Unmarshal(b, &r))
	return r, embedded(res)
}

// embedded is the image a tool result embeds, or nil.
func embedded(res *mcp.CallToolResult) []byte {
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok && len(img.Data) > 0 {
			return img.Data
		}
	}
	return nil
}

// Every result reaches the agent whatever its size and however late, end to end on the real
// binaries: mockflux renders a 1440x1440 PNG of over 6 MB (a FLUX.2 result at full size); the
// answer embeds a scaled JPEG preview and says so; the original is read in full by
// resources/read at hubu://images/<handle>, by the agent that owns it only; once mockflux's
// link has expired, a redelivery through another router still embeds the preview and the
// original is still read; hubuctl image saves the same bytes through Hubu.
func TestSuiteLargeResultsReachTheAgent(t *testing.T) {
	t.Parallel()
	server, id, dir, idConfig := stackPlace(t)
	su := startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_e2e_" + id, GongbuDB: "gongbu_e2e_" + id,
		Env: map[string][]string{
			"router":   {"ROUTER_IDENTITY_CONFIG=" + idConfig},
			"mockflux": {"MOCKFLUX_SAMPLE_TTL=3s", "MOCKFLUX_FULL_SIZE=true"},
		},
	})
	const (
		callID = "call_largeresult4Vq8Wn2Lk6Zp"
		args   = `{"prompt":"a fox in the snow, every hair","model":"flux-2-klein-4b","width":1440,"height":1440,"output_format":"png"}`
	)
	spend := func(cs *mcp.ClientSession) (map[string]any, *mcp.ImageContent) {
		t.Helper()
		res := must(cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate_image", Arguments: json.RawMessage(args), Meta: codexMeta(callID)}))(t)
		var out map[string]any
		noError(t, json.Unmarshal(must(json.Marshal(res.StructuredContent))(t), &out))
		var img *mcp.ImageContent
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.ImageContent:
				img = c
			case *mcp.ResourceLink:
				t.Fatal("a resource_link block in the result")
			}
		}
		return out, img
	}
	cs := su.routerFor(su.s.Credentials.AgentToken, 60*time.Second, nil)
	first, preview := spend(cs)
	r, _ := first["result"].(map[string]any)
	if first["status"] != "succeeded" || r == nil || preview == nil || preview.MIMEType != "image/jpeg" || r["embedded"] != "preview" {
		logs, _ := os.ReadFile(su.s.Gongbu.LogPath)
		t.Fatalf("first delivery: %v, embedded %v\ngongbu log:\n%s", first, preview != nil, logs)
	}
	pv := must(jpeg.DecodeConfig(bytes.NewReader(preview.Data)))(t)
	size, _ := r["size_bytes"].(float64)
	if pv.Width != 1024 || pv.Height != 1024 || len(preview.Data) > 512<<10 || size < 6e6 || r["width"] != 1440.0 || r["mime_type"] != "image/png" {
		t.Fatalf("preview %dx%d of %d bytes for an image of %v bytes: %v", pv.Width, pv.Height, len(preview.Data), size, r)
	}
	uri, _ := r["resource_uri"].(string)
	handle, _ := first["public_handle"].(string)
	if uri != "hubu://images/"+handle {
		t.Fatalf("resource_uri %q for %s", uri, handle)
	}
	readOriginal := func(cs *mcp.ClientSession) []byte {
		t.Helper()
		read := must(cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}))(t)
		if len(read.Contents) != 1 || read.Contents[0].MIMEType != "image/png" {
			t.Fatalf("resources/read: %+v", read.Contents)
		}
		b := read.Contents[0].Blob
		cfg := must(png.DecodeConfig(bytes.NewReader(b)))(t)
		if cfg.Width != 1440 || cfg.Height != 1440 || float64(len(b)) != size {
			t.Fatalf("resources/read: a %dx%d PNG of %d bytes, want 1440x1440 of %v", cfg.Width, cfg.Height, len(b), size)
		}
		return b
	}
	original := readOriginal(cs)

	link, _ := r["image_url"].(string)
	noError(t, poll(15*time.Second, 100*time.Millisecond, func() error {
		resp, err := http.Get(link)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			return fmt.Errorf("the provider's link still answers %d", resp.StatusCode)
		}
		return nil
	}))
	other := su.routerFor(su.s.Credentials.AgentToken, 20*time.Second, nil)
	again, againPreview := spend(other)
	if again["replayed"] != true || againPreview == nil || !bytes.Equal(againPreview.Data, preview.Data) {
		t.Fatalf("redelivery after the link expired: %v, the same preview %v", again, againPreview != nil && bytes.Equal(againPreview.Data, preview.Data))
	}
	if !bytes.Equal(readOriginal(other), original) {
		t.Fatal("the original read after the link expired differs")
	}

	file := filepath.Join(t.TempDir(), "fox.png")
	su.hubuctlOK(t, "image", handle, "-o", file)
	if saved := must(os.ReadFile(file))(t); !bytes.Equal(saved, original) {
		t.Fatalf("hubuctl image saved %d bytes, want the original's %d", len(saved), len(original))
	}

	// Another agent's router: the image is not found, whatever it knows of the handle.
	out := su.hubuctlOK(t, "agent", "create", "--name", "stranger", "--json")
	var created struct {
		Token string `json:"token"`
	}
	noError(t, json.Unmarshal([]byte(out), &created))
	su.extraSecrets = append(su.extraSecrets, created.Token)
	stranger := su.routerFor(created.Token, 5*time.Second, []string{"--state", filepath.Join(dir, "router-stranger.db")})
	if _, err := stranger.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err == nil {
		t.Fatal("another agent read the image")
	}
	if n := su.charges().Count; n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	su.settleAndReconcile(1)
}
