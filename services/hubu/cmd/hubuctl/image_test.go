package main

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
)

// keptImages keeps one PNG for every operation, and no preview.
type keptImages struct{ png []byte }

func (k keptImages) Image(_ context.Context, _ string, preview bool) (hubu.KeptImage, error) {
	if preview {
		return hubu.KeptImage{}, hubu.Errorf(hubu.CodeNotFound, "no preview: the image is small")
	}
	return hubu.KeptImage{MIMEType: "image/png", Bytes: k.png}, nil
}

// hubuctl image saves the image an operation produced, as the executor keeps it, to a file or
// to standard output; a missing preview and a missing -o are said plainly.
func TestImageCommand(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	kept := buf.Bytes()
	e := hubutest.New(t, &hubutest.Options{Clock: testclock.At(time.Now()), Images: keptImages{png: kept}})
	h := &realHubu{Env: e, t: t, secrets: []string{e.OperatorToken, e.ServiceToken},
		env: map[string]string{"HUBU_URL": e.URL, "HUBU_APPROVER_TOKEN": e.OperatorToken}}
	a := e.NewAgent(t, "painter", nil)
	resp, err := a.Client.AuthorizeWithResponse(context.Background(), hubutest.NewCall("flux-dev").Request())
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("authorize: %v", err)
	}
	handle := resp.JSON201.PublicHandle

	file := filepath.Join(t.TempDir(), "fox.png")
	out, err := h.ctl("image", handle, "-o", file)
	if got, _ := os.ReadFile(file); err != nil || !bytes.Equal(got, kept) || !strings.Contains(out, "Saved "+file+" (image/png, ") {
		t.Fatalf("image -o FILE: %v %s", err, out)
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"image", "-o", "-", handle}, func(k string) string { return h.env[k] }, &stdout, &stderr); err != nil ||
		!bytes.Equal(stdout.Bytes(), kept) {
		t.Fatalf("image -o -: %v %s", err, stderr.String())
	}
	if out, err := h.ctl("image", handle, "-o", file, "--preview"); err == nil || !strings.Contains(out, "not_found") {
		t.Fatalf("image --preview of a small image: %v %s", err, out)
	}
	if out, err := h.ctl("image", handle); err == nil || code(err) != 2 || !strings.Contains(out, "needs -o FILE") {
		t.Fatalf("image without -o: %v %s", err, out)
	}
}

func (k keptImages) ImageSize(context.Context, uuid.UUID) (contract.Dimensions, error) {
	return contract.Dimensions{}, hubu.Errorf(hubu.CodeNotFound, "no sizes here")
}
