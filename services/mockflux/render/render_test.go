package render_test

import (
	"bytes"
	"image/jpeg"
	"image/png"
	"testing"

	"hubu.dev/hubu/services/mockflux/render"
)

func TestPNGIsDeterministicAndSeedDependent(t *testing.T) {
	t.Parallel()
	a, err := render.PNG("a red fox", 42, 1024, 768)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := render.PNG("a red fox", 42, 1024, 768)
	otherSeed, _ := render.PNG("a red fox", 43, 1024, 768)
	otherPrompt, _ := render.PNG("a blue fox", 42, 1024, 768)
	if !bytes.Equal(a, again) {
		t.Fatal("the same prompt and seed gave different bytes")
	}
	if bytes.Equal(a, otherSeed) || bytes.Equal(a, otherPrompt) {
		t.Fatal("another seed or prompt gave the same image")
	}
	img, err := png.Decode(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1024/render.Scale || b.Dy() != 768/render.Scale {
		t.Fatalf("size %v", b)
	}
}

func TestDefaultSizeAndJPEG(t *testing.T) {
	t.Parallel()
	b, err := render.JPEG("ultra", 7, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	img, err := jpeg.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if s := img.Bounds(); s.Dx() != render.DefaultSide || s.Dy() != render.DefaultSide {
		t.Fatalf("size %v", s)
	}
	again, _ := render.JPEG("ultra", 7, 0, 0)
	if !bytes.Equal(b, again) {
		t.Fatal("JPEG not deterministic")
	}
}
