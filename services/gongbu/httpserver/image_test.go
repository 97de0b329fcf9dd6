package httpserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/changefeed"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/httpserver"
	"hubu.dev/hubu/services/gongbu/postgres"
	"hubu.dev/hubu/sql/sqltest"
)

// An agent gets its own operation's image by public handle, as Gongbu downloaded it; nobody
// else gets it, and the execution describes it.
func TestOperationImageForAgents(t *testing.T) {
	t.Parallel()
	b, p, d := submittedWithImages(t)
	ctx := context.Background()
	agent := b.client(t, agentA)

	// Submitted, no image yet.
	if resp, err := agent.GetOperationImageWithResponse(ctx, d.PublicHandle, nil); err != nil || resp.StatusCode() != http.StatusNotFound {
		t.Fatalf("before the result: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
	p.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	b.env.Clock.Advance(gongbutest.PollInterval)
	b.env.Tick(t)

	digest := sha256.Sum256(gongbutest.TinyPNG)
	etag := `"` + hex.EncodeToString(digest[:]) + `"`
	got, err := agent.GetOperationImageWithResponse(ctx, d.PublicHandle, nil)
	if err != nil || got.StatusCode() != http.StatusOK || !bytes.Equal(got.Body, gongbutest.TinyPNG) ||
		got.HTTPResponse.Header.Get("Content-Type") != "image/png" || got.HTTPResponse.Header.Get("ETag") != etag {
		t.Fatalf("own image: %v %d %q %v", err, got.StatusCode(), got.HTTPResponse.Header.Get("Content-Type"), got.HTTPResponse.Header)
	}
	exec, err := agent.GetOperationExecutionWithResponse(ctx, d.PublicHandle, nil)
	if err != nil || exec.JSON200 == nil || exec.JSON200.Result == nil || exec.JSON200.Result.Image == nil {
		t.Fatalf("execution: %v %s", err, exec.Body)
	}
	if i := exec.JSON200.Result.Image; i.Sha256 != hex.EncodeToString(digest[:]) || i.SizeBytes != int64(len(gongbutest.TinyPNG)) || i.MimeType != "image/png" {
		t.Fatalf("the execution describes %+v", i)
	}

	// A client holding the image already is told so.
	req, _ := http.NewRequest(http.MethodGet, b.url+"/v1/operations/"+d.PublicHandle+"/image", nil)
	req.Header.Set("Authorization", "Bearer "+agentA)
	req.Header.Set("If-None-Match", etag)
	if status, body := b.do(t, req); status != http.StatusNotModified || len(body) != 0 {
		t.Fatalf("If-None-Match: %d, %d bytes", status, len(body))
	}

	// A part of it, by Range.
	req, _ = http.NewRequest(http.MethodGet, b.url+"/v1/operations/"+d.PublicHandle+"/image", nil)
	req.Header.Set("Authorization", "Bearer "+agentA)
	req.Header.Set("Range", "bytes=0-7")
	if status, body := b.do(t, req); status != http.StatusPartialContent || !bytes.Equal(body, gongbutest.TinyPNG[:8]) {
		t.Fatalf("Range: %d, %q", status, body)
	}
	// A Range it cannot serve is a problem with a stable code, like any other refusal.
	for bad, contentRange := range map[string]string{"bytes=99999-": fmt.Sprintf("bytes */%d", len(gongbutest.TinyPNG)), "pages=1-2": ""} {
		req, _ = http.NewRequest(http.MethodGet, b.url+"/v1/operations/"+d.PublicHandle+"/image", nil)
		req.Header.Set("Authorization", "Bearer "+agentA)
		req.Header.Set("Range", bad)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || resp.Header.Get("Content-Type") != "application/problem+json" ||
			problemCode(t, body) != "invalid_arguments" || resp.Header.Get("Content-Range") != contentRange {
			t.Fatalf("Range %q: %d %q %q %s", bad, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Range"), body)
		}
	}

	for _, c := range []struct {
		name   string
		token  string
		handle string
		status int
		code   string
	}{
		{"another agent's operation", agentB, d.PublicHandle, http.StatusNotFound, "not_found"},
		{"no token", "", d.PublicHandle, http.StatusUnauthorized, "unauthorized"},
		{"a malformed handle", agentA, "hubu:public-operation:v1:not-a-uuid", http.StatusBadRequest, "invalid_arguments"},
	} {
		resp, err := b.client(t, c.token).GetOperationImageWithResponse(ctx, c.handle, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != c.status || problemCode(t, resp.Body) != c.code || bytes.Contains(resp.Body, gongbutest.TinyPNG[:8]) {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode(), resp.Body)
		}
	}
}

// Hubu reads any operation's image with its service credential (for hubuctl image and the
// console); the handle's form is still checked.
func TestHubuReadsImages(t *testing.T) {
	t.Parallel()
	b, p, d := submittedWithImages(t)
	p.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	b.env.Clock.Advance(gongbutest.PollInterval)
	b.env.Tick(t)
	hubu := b.client(t, serviceToken)
	got, err := hubu.GetOperationImageWithResponse(context.Background(), d.PublicHandle, nil)
	if err != nil || got.StatusCode() != http.StatusOK || !bytes.Equal(got.Body, gongbutest.TinyPNG) {
		t.Fatalf("Hubu's read: %v %d", err, got.StatusCode())
	}
	bad, err := hubu.GetOperationImageWithResponse(context.Background(), "hubu:public-operation:v1:nope", nil)
	if err != nil || bad.StatusCode() != http.StatusBadRequest || problemCode(t, bad.Body) != "invalid_arguments" {
		t.Fatalf("a malformed handle: %v %d %s", err, bad.StatusCode(), bad.Body)
	}
	// A tiny image has no preview to serve.
	yes := true
	if none, err := hubu.GetOperationImageWithResponse(context.Background(), d.PublicHandle, &gongbuapi.GetOperationImageParams{Preview: &yes}); err != nil ||
		none.StatusCode() != http.StatusNotFound {
		t.Fatalf("the preview of a tiny image: %v %d", err, none.StatusCode())
	}
}

// A result larger than PreviewAbove is kept with its sides and a preview: an answer that
// embeds up to 1 MiB carries the preview, one that embeds up to the largest carries the
// original, and the preview is served by ?preview=true.
func TestLargeImageHasAPreview(t *testing.T) {
	t.Parallel()
	b, p, d := submittedWithImages(t)
	ctx := context.Background()
	original := gongbutest.NoisyPNG(1600, 1200, 3)
	p.OnFetch(gongbutest.Deliver("image/png", original))
	p.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	b.env.Clock.Advance(gongbutest.PollInterval)
	b.env.Tick(t)

	agent := b.client(t, agentA)
	mib, most := int64(1<<20), int64(gongbu.MaxImageBytes)
	resp, err := agent.GetOperationExecutionWithResponse(ctx, d.PublicHandle, &gongbuapi.GetOperationExecutionParams{EmbedImage: &mib})
	if err != nil || resp.JSON200 == nil || resp.JSON200.Result == nil || resp.JSON200.Result.Image == nil {
		t.Fatalf("execution: %v %s", err, resp.Body)
	}
	img := resp.JSON200.Result.Image
	if img.Width == nil || *img.Width != 1600 || img.Height == nil || *img.Height != 1200 || img.SizeBytes != int64(len(original)) || img.Data != nil {
		t.Fatalf("the image described: %+v", img)
	}
	pv := img.Preview
	if pv == nil || pv.Data == nil || pv.Width != 1024 || pv.Height != 768 || pv.SizeBytes > int64(gongbu.PreviewAbove) ||
		int64(len(*pv.Data)) != pv.SizeBytes || pv.MimeType != "image/jpeg" {
		t.Fatalf("the preview: %+v", pv)
	}
	sum := sha256.Sum256(*pv.Data)
	if hex.EncodeToString(sum[:]) != pv.Sha256 {
		t.Fatal("the preview embedded is not the one described")
	}
	whole, err := agent.GetOperationExecutionWithResponse(ctx, d.PublicHandle, &gongbuapi.GetOperationExecutionParams{EmbedImage: &most})
	if err != nil || whole.JSON200 == nil || whole.JSON200.Result.Image.Data == nil || !bytes.Equal(*whole.JSON200.Result.Image.Data, original) ||
		whole.JSON200.Result.Image.Preview.Data != nil {
		t.Fatalf("embed_image at the largest: %v, the original embedded %v", err, whole.JSON200 != nil && whole.JSON200.Result.Image.Data != nil)
	}
	yes := true
	served, err := agent.GetOperationImageWithResponse(ctx, d.PublicHandle, &gongbuapi.GetOperationImageParams{Preview: &yes})
	if err != nil || served.StatusCode() != http.StatusOK || !bytes.Equal(served.Body, *pv.Data) ||
		served.HTTPResponse.Header.Get("Content-Type") != "image/jpeg" || served.HTTPResponse.Header.Get("ETag") != `"`+pv.Sha256+`"` {
		t.Fatalf("?preview=true: %v %d %v", err, served.StatusCode(), served.HTTPResponse.Header)
	}
	if other, err := b.client(t, agentB).GetOperationImageWithResponse(ctx, d.PublicHandle, &gongbuapi.GetOperationImageParams{Preview: &yes}); err != nil ||
		other.StatusCode() != http.StatusNotFound {
		t.Fatalf("another agent's preview: %v %d", err, other.StatusCode())
	}
}

// With embed_image, the execution's answer carries its kept image when the image is no
// larger than asked, and only then; another agent gets neither; a bound out of range is
// refused.
func TestExecutionEmbedsTheKeptImage(t *testing.T) {
	t.Parallel()
	b, p, d := submittedWithImages(t)
	ctx := context.Background()
	size := int64(len(gongbutest.TinyPNG))
	embedded := func(t *testing.T, token string, limit *int64) (int, *[]byte) {
		t.Helper()
		resp, err := b.client(t, token).GetOperationExecutionWithResponse(ctx, d.PublicHandle, &gongbuapi.GetOperationExecutionParams{EmbedImage: limit})
		if err != nil {
			t.Fatal(err)
		}
		if resp.JSON200 == nil || resp.JSON200.Result == nil || resp.JSON200.Result.Image == nil {
			return resp.StatusCode(), nil
		}
		return resp.StatusCode(), resp.JSON200.Result.Image.Data
	}

	if status, data := embedded(t, agentA, &size); status != http.StatusOK || data != nil {
		t.Fatalf("before the result: %d, embedded %v", status, data != nil)
	}
	p.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	b.env.Clock.Advance(gongbutest.PollInterval)
	b.env.Tick(t)

	if _, data := embedded(t, agentA, &size); data == nil || !bytes.Equal(*data, gongbutest.TinyPNG) {
		t.Fatalf("no larger than the bound: embedded %v", data != nil)
	}
	smaller := size - 1
	for name, limit := range map[string]*int64{"no bound": nil, "a smaller bound": &smaller} {
		if status, data := embedded(t, agentA, limit); status != http.StatusOK || data != nil {
			t.Errorf("%s: %d, embedded %v", name, status, data != nil)
		}
	}
	if status, data := embedded(t, agentB, &size); status != http.StatusNotFound || data != nil {
		t.Errorf("another agent: %d, embedded %v", status, data != nil)
	}
	for _, bad := range []int64{-1, gongbu.MaxImageBytes + 1} {
		if status, _ := embedded(t, agentA, &bad); status != http.StatusBadRequest {
			t.Errorf("embed_image=%d: %d, want 400", bad, status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, b.url+"/v1/operations/"+d.PublicHandle+"/execution?embed_image=lots", nil)
	req.Header.Set("Authorization", "Bearer "+agentA)
	if status, body := b.do(t, req); status != http.StatusBadRequest || problemCode(t, body) != "invalid_arguments" ||
		!bytes.Contains(body, []byte("embed_image")) || bytes.Contains(body, []byte("lots")) {
		t.Errorf("embed_image=lots: %d %s, want 400 naming the parameter, not its value", status, body)
	}
}

// submittedWithImages is a Gongbu whose provider delivers TinyPNG, and agent A's decision
// executed there, submitted and not yet Ready.
// A long-poll that embeds the image brings it in the same read that finds the execution
// changed: once woken, one statement to Postgres answers it (the last step of a new spend's
// critical path). A caller who may not read the operation never has its image read, whatever
// it asks. The server's reads are counted on a pool of their own; the worker that records the
// success uses another.
func TestEmbeddingReadsTheImageWithTheExecution(t *testing.T) {
	t.Parallel()
	trips := &sqltest.RoundTrips{}
	feed := &changefeed.Feed{}
	p := gongbutest.NewImageProvider(true)
	var counted *postgres.Store
	b := setup(t, withFeed(feed, time.Hour), func(srv *httpserver.Server, env *gongbutest.Env) {
		env.Service = env.NewService(p)
		served := env.NewService(p)
		counted = postgres.NewStore(sqltest.NewCountedPool(t, env.DBURL, trips))
		served.Store = counted
		srv.Executions = served
	})
	size, thirty, seen := int64(len(gongbutest.TinyPNG)), 30, gongbuapi.Submitted
	ask := func(token string, d gongbu.Decision) <-chan *gongbuapi.GetOperationExecutionResponse {
		return asking(t, b, token, d.PublicHandle, gongbuapi.GetOperationExecutionParams{Wait: &thirty, State: &seen, EmbedImage: &size})
	}

	for run := range 2 { // counted the second time, once pgx's statement cache is warm
		d := b.env.Issue(agentA)
		b.execute(t, b.service, d)
		// The first read is either form, as the check answers before it or not: warm both.
		if _, err := counted.GetByHandle(context.Background(), d.PublicHandle); err != nil {
			t.Fatal(err)
		}
		if _, _, err := counted.GetByHandleWithImage(context.Background(), d.PublicHandle, size); err != nil {
			t.Fatal(err)
		}
		trips.Reset()
		answer := ask(agentA, d)
		if !waitfor.Within(10*time.Second, func() bool { n, _ := trips.Counts(); return n > 0 }) { // the first read's answer: still submitted
			t.Fatal("the request never read the execution")
		}
		trips.Reset()
		succeed(t, b, feed, p, d)
		resp := answered(t, answer)
		if resp.JSON200 == nil || resp.JSON200.Result == nil || resp.JSON200.Result.Image == nil ||
			resp.JSON200.Result.Image.Data == nil || !bytes.Equal(*resp.JSON200.Result.Image.Data, gongbutest.TinyPNG) {
			t.Fatalf("no embedded image: %d %s", resp.StatusCode(), resp.Body)
		}
		if n, _ := trips.Counts(); run == 1 && (n != 1 || fmt.Sprint(trips.Queries()) != "[GetExecutionWithImageByHandle]") {
			t.Fatalf("once woken: %d round trips, %v; want 1, the execution with its image", n, trips.Queries())
		}
	}

	// Another agent, on a succeeded execution: refused, and no image read for it.
	d := b.env.Issue(agentA)
	b.execute(t, b.service, d)
	succeed(t, b, feed, p, d)
	trips.Reset()
	if resp := answered(t, ask(agentB, d)); resp.StatusCode() != http.StatusNotFound {
		t.Fatalf("another agent: %d %s", resp.StatusCode(), resp.Body)
	}
	if q := fmt.Sprint(trips.Queries()); strings.Contains(q, "Image") {
		t.Fatalf("an image was read for a caller who may not see it: %s", q)
	}
}

func submittedWithImages(t *testing.T) (*bundle, *gongbutest.ImageProvider, gongbu.Decision) {
	t.Helper()
	p := gongbutest.NewImageProvider(true)
	b := setup(t, func(srv *httpserver.Server, env *gongbutest.Env) {
		env.Service = env.NewService(p)
		srv.Executions = env.Service
	})
	d := b.env.Issue(agentA)
	b.execute(t, b.service, d)
	return b, p, d
}
