package e2e_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
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
