package mcpserver_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"

	"hubu.dev/hubu/router/mcpserver"
	"hubu.dev/hubu/router/routertest"
)

// images counts a result's embedded images.
func images(res *mcp.CallToolResult) int {
	n := 0
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok && len(img.Data) > 0 {
			n++
		}
	}
	return n
}

// linkedOnly checks a spend succeeded with the image linked and not embedded.
func linkedOnly(t *testing.T, res *mcp.CallToolResult, url string) {
	t.Helper()
	o := toolResult(t, res)
	if res.IsError || o.Status != "succeeded" || o.Result == nil || o.Result.ImageURL != url {
		t.Fatalf("want a success linking %s: %+v", url, o)
	}
	if n := images(res); n != 0 {
		t.Fatalf("%d images embedded, want none", n)
	}
}

// notFinal checks the next delivery of the call asks Hubu again: a download that failed or was
// refused is never the recorded last word.
func notFinal(t *testing.T, e *env, callID string) *mcp.CallToolResult {
	t.Helper()
	before := e.backend.Calls("authorize")
	again := e.call(t, "generate_image", fox, codex(callID))
	if e.backend.Calls("authorize") != before+1 {
		t.Fatalf("the answer was recorded as final: the redelivery did not reach Hubu")
	}
	return again
}

// By default the router downloads no image from a loopback, private or link-local address,
// judged on the address it dials: a name that resolves to one is refused as well. The spend
// still succeeds with the link, and the answer stays open for a later delivery.
func TestImageOnAPrivateAddressIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, &options{guardImages: true})
	e.backend.SetKept(nil) // the provider's link is all there is
	loopback := e.backend.ImageURL
	byName := strings.Replace(loopback, "127.0.0.1", "localhost", 1)
	for i, url := range []string{loopback, byName} {
		e.backend.SetImageURL(url)
		callID := fmt.Sprintf("call_privatedWTtjl8YssSH0hhM%d", i)
		res := e.call(t, "generate_image", fox, codex(callID))
		linkedOnly(t, res, url)
		linkedOnly(t, notFinal(t, e, callID), url)
		execution := e.call(t, "get_execution", fmt.Sprintf(`{"public_handle":%q}`, toolResult(t, res).PublicHandle), nil)
		if n := images(execution); n != 0 {
			t.Fatalf("get_execution embedded %d images from %s", n, url)
		}
	}
	if n := e.backend.Calls("image"); n != 0 {
		t.Fatalf("the image host got %d requests; the guard must refuse before connecting", n)
	}
}

// A redirect to another host is not followed (the guard cannot vouch for where it leads); one
// on the same host is.
func TestImageRedirects(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(routertest.TinyPNG())
	}))
	t.Cleanup(other.Close)
	otherByName := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-other-port":
			http.Redirect(w, r, other.URL+"/sample.png", http.StatusFound)
		case "/to-other-name":
			http.Redirect(w, r, otherByName+"/sample.png", http.StatusFound)
		case "/same-host":
			http.Redirect(w, r, "/sample.png", http.StatusFound)
		default:
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(routertest.TinyPNG())
		}
	}))
	t.Cleanup(host.Close)
	e := setup(t, nil) // loopback allowed, as on the local stack
	e.backend.SetKept(nil)
	for i, path := range []string{"/to-other-port", "/to-other-name"} {
		url := host.URL + path
		e.backend.SetImageURL(url)
		callID := fmt.Sprintf("call_redirectwbkE6hka5vFyjjL%d", i)
		linkedOnly(t, e.call(t, "generate_image", fox, codex(callID)), url)
		notFinal(t, e, callID)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("a redirect to another host was followed %d times", n)
	}
	e.backend.SetImageURL(host.URL + "/same-host")
	if res := e.call(t, "generate_image", fox, codex("call_redirect_same")); images(res) != 1 {
		t.Fatalf("a redirect on the same host was not followed: %+v", toolResult(t, res))
	}
}

// An image above the router's limit is linked, never embedded.
func TestOversizedImageIsNotEmbedded(t *testing.T) {
	t.Parallel()
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		chunk := make([]byte, 64<<10)
		for range 64 { // 4 MiB, above the default 1 MiB limit
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(big.Close)
	e := setup(t, nil)
	e.backend.SetKept(nil)
	url := big.URL + "/sample.png"
	e.backend.SetImageURL(url)
	linkedOnly(t, e.call(t, "generate_image", fox, codex("call_bigimageVtFFd0UMtFdJGpgU")), url)
}

// Results by reference: the image Gongbu keeps is embedded (from Gongbu, a trusted backend,
// even where provider links on private addresses are refused), the registry records only a
// reference to it, and every replay embeds it from Gongbu again without asking Hubu.
func TestKeptImageIsRecordedByReference(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "router.db")
	e := setup(t, &options{guardImages: true, state: state})
	const callID = "call_keptimageR3fQ9wLp2ZxT7v"
	first := e.call(t, "generate_image", fox, codex(callID))
	if images(first) != 1 || toolResult(t, first).Status != "succeeded" {
		t.Fatalf("first delivery: %d images, %+v", images(first), toolResult(t, first))
	}
	if n := e.backend.Calls("image"); n != 0 {
		t.Fatalf("the provider's link was downloaded %d times although Gongbu keeps the image", n)
	}

	db, err := sql.Open("sqlite", "file:"+state+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var recorded string
	if err := db.QueryRow("SELECT result FROM calls WHERE harness_call_id = ?", callID).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	png := base64.StdEncoding.EncodeToString(routertest.TinyPNG())
	if len(recorded) > 2<<10 || strings.Contains(recorded, png) || !strings.Contains(recorded, `"kept_image"`) {
		t.Fatalf("the registry recorded %d bytes (image bytes in it: %v): %s", len(recorded), strings.Contains(recorded, png), recorded)
	}

	if n := e.backend.Calls("kept_image"); n != 0 {
		t.Fatalf("Gongbu embedded the image in the execution's answer, yet it was fetched %d times", n)
	}

	authorized, executions := e.backend.Calls("authorize"), e.backend.Calls("execution")
	for range 2 {
		again := e.call(t, "generate_image", fox, codex(callID))
		if o := toolResult(t, again); !o.Replayed || images(again) != 1 {
			t.Fatalf("replay: replayed %v, %d images", o.Replayed, images(again))
		}
	}
	// The router embedded the image a moment ago: it holds it, and asks Gongbu nothing.
	if e.backend.Calls("authorize") != authorized || e.backend.Calls("execution") != executions || e.backend.Calls("kept_image") != 0 {
		t.Fatalf("replays asked authorize %d→%d, execution %d→%d; kept image fetched %d times, want never",
			authorized, e.backend.Calls("authorize"), executions, e.backend.Calls("execution"), e.backend.Calls("kept_image"))
	}

	// Another router on the same registry holds nothing: it embeds the image from Gongbu.
	other := setupOn(t, e, &options{guardImages: true, state: state})
	if again := other.call(t, "generate_image", fox, codex(callID)); !toolResult(t, again).Replayed || images(again) != 1 {
		t.Fatalf("replay through another router: %d images, %+v", images(again), toolResult(t, again))
	}
	if n := e.backend.Calls("kept_image"); n != 1 {
		t.Fatalf("kept image fetched %d times, want once", n)
	}

	// Gongbu down: a router that does not hold the image replays the recorded answer, with
	// the link only.
	e.backend.SetDown(true)
	third := setupOn(t, e, &options{guardImages: true, state: state})
	again := third.call(t, "generate_image", fox, codex(callID))
	if o := toolResult(t, again); !o.Replayed || o.Status != "succeeded" || images(again) != 0 || o.Result == nil {
		t.Fatalf("replay with Gongbu down: %d images, %+v", images(again), o)
	}
}

// A replay is the registry's answer: a Gongbu that hangs on the image holds it up no longer
// than KeptImageWait, and the answer goes without the image.
func TestReplayDoesNotWaitOnAHangingGongbu(t *testing.T) {
	t.Parallel()
	g := newScriptedGongbu(t)
	g.setKept(keptOK)
	state := filepath.Join(t.TempDir(), "router.db")
	e := setup(t, &options{gongbuURL: g.url, state: state, keptWait: 300 * time.Millisecond})
	const callID = "call_hanginggongbuQ4w8Ez2Rk6"
	if first := e.call(t, "generate_image", fox, codex(callID)); images(first) != 1 {
		t.Fatalf("first delivery embedded %d images", images(first))
	}
	g.setKept(keptHang)
	fresh := setupOn(t, e, &options{gongbuURL: g.url, state: state, keptWait: 300 * time.Millisecond})
	start := time.Now()
	again := fresh.call(t, "generate_image", fox, codex(callID))
	if o := toolResult(t, again); !o.Replayed || o.Status != "succeeded" || images(again) != 0 {
		t.Fatalf("replay with Gongbu hanging: %d images, %+v", images(again), o)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the replay took %s", took)
	}
}

// A row recorded before results by reference holds the image's bytes; it is replayed with
// them, asking Gongbu nothing.
func TestReplayOfARowWithImageBytes(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "router.db")
	e := setup(t, &options{state: state})
	const callID = "call_legacyrow8Hn2Wq5Tz1Lv3"
	first := toolResult(t, e.call(t, "generate_image", fox, codex(callID)))
	legacy, err := json.Marshal(map[string]any{"outcome": first, "image": routertest.TinyPNG()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE calls SET result = ? WHERE harness_call_id = ?", string(legacy), callID); err != nil {
		t.Fatal(err)
	}
	fresh := setupOn(t, e, &options{state: state})
	kept := e.backend.Calls("kept_image")
	e.backend.SetDown(true)
	again := fresh.call(t, "generate_image", fox, codex(callID))
	if o := toolResult(t, again); !o.Replayed || images(again) != 1 || o.PublicHandle != first.PublicHandle {
		t.Fatalf("replay of a row with image bytes: %d images, %+v", images(again), o)
	}
	if n := e.backend.Calls("kept_image"); n != kept {
		t.Fatalf("the replay asked Gongbu for the image (%d→%d)", kept, n)
	}
}

// The router embeds only what Gongbu would keep: a PNG, JPEG or WebP image whose bytes are the
// type it declares. An SVG (which can carry script) or bytes that are not the declared type
// are linked, never embedded.
func TestOnlyKeptImageTypesAreEmbedded(t *testing.T) {
	t.Parallel()
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	for i, c := range []struct {
		contentType string
		body        []byte
	}{
		{"image/svg+xml", svg},
		{"image/png", svg},
		{"image/gif", []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;")},
		{"image/jpeg", routertest.TinyPNG()},
	} {
		host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", c.contentType)
			_, _ = w.Write(c.body)
		}))
		t.Cleanup(host.Close)
		e := setup(t, nil)
		e.backend.SetKept(nil)
		url := host.URL + "/sample"
		e.backend.SetImageURL(url)
		linkedOnly(t, e.call(t, "generate_image", fox, codex(fmt.Sprintf("call_imagetypeVtFFd0UMtFdJG%d", i))), url)
	}
}

// noisyPNG is a side×side PNG of pseudo-random pixels: larger than a small embedding limit.
func noisyPNG(t *testing.T, side int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, side, side))
	x := uint32(2463534242)
	for i := range img.Pix {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		img.Pix[i] = byte(x) | 1
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tinyJPEG is an 8x8 JPEG, the stand-in for a preview.
func tinyJPEG(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// An image larger than the router embeds reaches the agent as its preview, embedded and said
// so, with the original readable in full at its resource URI, by resources/read; a replay
// through another router embeds the preview again. No result carries a resource_link block.
func TestLargeImageEmbedsItsPreview(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "router.db")
	e := setup(t, &options{imageLimit: 4 << 10, state: state})
	original, preview := noisyPNG(t, 64), tinyJPEG(t)
	e.backend.SetKeptWithPreview(original, preview, 8)
	const callID = "call_largeimagePv7Qe3Wz9Lk2"
	check := func(t *testing.T, res *mcp.CallToolResult) mcpserver.ToolResult {
		t.Helper()
		o := toolResult(t, res)
		if res.IsError || o.Status != "succeeded" || o.Result == nil {
			t.Fatalf("not a success: %+v", o)
		}
		var got *mcp.ImageContent
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.ImageContent:
				got = c
			case *mcp.ResourceLink, *mcp.EmbeddedResource:
				t.Fatalf("a %T block in the result", c)
			}
		}
		if got == nil || got.MIMEType != "image/jpeg" || !bytes.Equal(got.Data, preview) {
			t.Fatalf("embedded %+v, want the preview", got)
		}
		r := o.Result
		if r.Embedded != "preview" || r.Preview == nil || r.Preview.Width != 8 || r.Preview.MIMEType != "image/jpeg" ||
			r.ResourceURI != "hubu://images/"+o.PublicHandle || r.SizeBytes != int64(len(original)) || r.MIMEType != "image/png" ||
			!strings.Contains(o.Message, "resources/read at hubu://images/"+o.PublicHandle) {
			t.Fatalf("the result says %+v, %q", r, o.Message)
		}
		return o
	}
	o := check(t, e.call(t, "generate_image", fox, codex(callID)))

	read, err := e.session.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: o.Result.ResourceURI})
	if err != nil || len(read.Contents) != 1 || !bytes.Equal(read.Contents[0].Blob, original) || read.Contents[0].MIMEType != "image/png" ||
		read.Contents[0].URI != o.Result.ResourceURI {
		t.Fatalf("resources/read: %v %+v", err, read)
	}
	for _, uri := range []string{"hubu://images/hubu:public-operation:v1:00000000-0000-4000-8000-000000000000", "hubu://images/nope"} {
		if _, err := e.session.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("resources/read %s: no error", uri)
		}
	}
	templates, err := e.session.ListResourceTemplates(context.Background(), nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "hubu://images/{+handle}" {
		t.Fatalf("resource templates: %v %+v", err, templates)
	}

	other := setupOn(t, e, &options{imageLimit: 4 << 10, state: state})
	if again := check(t, other.call(t, "generate_image", fox, codex(callID))); !again.Replayed {
		t.Fatal("not a replay")
	}
}
