package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
)

// stillImages keeps an image for every operation, and a preview for the big one.
type stillImages struct {
	mu  sync.Mutex
	big string
}

func (s *stillImages) Image(_ context.Context, handle string, preview bool) (hubu.KeptImage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case preview && handle != s.big:
		return hubu.KeptImage{}, hubu.Errorf(hubu.CodeNotFound, "no preview")
	case preview:
		return hubu.KeptImage{MIMEType: "image/jpeg", Bytes: []byte("preview of " + handle)}, nil
	}
	return hubu.KeptImage{MIMEType: "image/png", Bytes: []byte("image of " + handle)}, nil
}

// The operations page shows what each succeeded operation produced: the preview of a large
// image, the image itself otherwise, and the whole image a click away; signed in only.
func TestOperationsShowTheirImages(t *testing.T) {
	t.Parallel()
	images := &stillImages{}
	b := &bundle{hubutest.New(t, &hubutest.Options{Console: true, Images: images})}
	a := b.newAgent(t, "painter")
	small, big := b.succeeded(t, a), b.succeeded(t, a)
	images.mu.Lock()
	images.big = big
	images.mu.Unlock()
	pending := a.hold(t, "not yet")

	anon := b.browser(t)
	if got := anon.get("/console/operations/image?handle=" + url.QueryEscape(small)); got.status == http.StatusOK {
		t.Fatalf("an image served signed out: %d", got.status)
	}
	br := b.browser(t)
	br.mustSignIn(b.OperatorToken)
	page := br.get("/console/operations")
	// html/template escapes the handle's colons as %3a.
	src := func(handle string) string {
		return strings.ToLower(`src="/console/operations/image?handle=` + url.QueryEscape(handle) + `"`)
	}
	body := strings.ToLower(page.body)
	if page.status != http.StatusOK || !strings.Contains(body, src(small)) || !strings.Contains(body, src(big)) {
		t.Fatalf("operations: %d, no images:\n%s", page.status, page.body)
	}
	if strings.Contains(body, src(pending)) {
		t.Fatal("an operation still pending approval shows an image")
	}
	for _, c := range []struct{ path, body, contentType string }{
		{"/console/operations/image?handle=" + url.QueryEscape(small), "image of " + small, "image/png"},
		{"/console/operations/image?handle=" + url.QueryEscape(big), "preview of " + big, "image/jpeg"},
		{"/console/operations/image?full=1&handle=" + url.QueryEscape(big), "image of " + big, "image/png"},
	} {
		got := br.get(c.path)
		if got.status != http.StatusOK || got.body != c.body || got.header.Get("Content-Type") != c.contentType {
			t.Fatalf("%s: %d %q %q", c.path, got.status, got.header.Get("Content-Type"), got.body)
		}
	}
	mustStatus(t, "a malformed handle", br.get("/console/operations/image?handle=nope"), http.StatusNotFound)
}

// succeeded is a flux-dev operation of a that the executor settled.
func (b *bundle) succeeded(t testing.TB, a agent) string {
	t.Helper()
	resp, err := a.Client.AuthorizeWithResponse(context.Background(), hubutest.NewCall("flux-dev").Request())
	if err != nil || resp.JSON201 == nil || resp.JSON201.DecisionId == nil {
		t.Fatalf("authorize: %v %s", err, resp.Body)
	}
	settled, err := b.Client(t, b.ServiceToken).SettleDecisionWithResponse(context.Background(), *resp.JSON201.DecisionId, hubuapi.SettleRequest{AmountMicros: 25_000})
	if err != nil || settled.JSON200 == nil || settled.JSON200.State != hubuapi.OperationStateSucceeded {
		t.Fatalf("settle: %v %s", err, settled.Body)
	}
	return resp.JSON201.PublicHandle
}

func (s *stillImages) ImageSize(context.Context, uuid.UUID) (contract.Dimensions, error) {
	return contract.Dimensions{}, hubu.Errorf(hubu.CodeNotFound, "no sizes here")
}
