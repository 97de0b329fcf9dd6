package render_test

import (
	"bytes"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"testing"

	"hubu.dev/hubu/services/mockflux/render"
)

func TestEncodeIsDeterministicAndSeedDependent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		format, contentType string
		width, height       int // requested
		w, h                int // drawn
		decode              func(io.Reader) (image.Image, error)
	}{
		{"png", "image/png", 1024, 768, 1024 / render.Scale, 768 / render.Scale, png.Decode},
		{"jpeg", "image/jpeg", 0, 0, render.DefaultSide, render.DefaultSide, jpeg.Decode}, // no size requested
	} {
		encode := func(prompt string, seed int64) []byte {
			b, contentType, err := render.Encode(c.format, prompt, seed, c.width, c.height)
			if err != nil || contentType != c.contentType {
				t.Fatalf("%s: content type %q, err %v", c.format, contentType, err)
			}
			return b
		}
		b := encode("a red fox", 42)
		if !bytes.Equal(b, encode("a red fox", 42)) {
			t.Fatalf("%s: the same prompt and seed gave different bytes", c.format)
		}
		if bytes.Equal(b, encode("a red fox", 43)) || bytes.Equal(b, encode("a blue fox", 42)) {
			t.Fatalf("%s: another seed or prompt gave the same image", c.format)
		}
		img, err := c.decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if s := img.Bounds(); s.Dx() != c.w || s.Dy() != c.h {
			t.Fatalf("%s: size %v", c.format, s)
		}
	}
}

// The pooled encoder writes exactly what png.Encode writes, image after image.
func TestPooledEncoderMatchesPNGEncode(t *testing.T) {
	for i := range 3 {
		b, _, err := render.Encode("png", "a red fox", int64(i), 512, 512)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := png.Encode(&want, render.Image("a red fox", int64(i), 512, 512)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("image %d differs from png.Encode's", i)
		}
	}
}

// EncodeFull draws the size asked for, as large as a real result: a 1440x1440 PNG of over
// 6 MB, the same for the same prompt and seed.
func TestEncodeFull(t *testing.T) {
	t.Parallel()
	b, contentType, err := render.EncodeFull("png", "a red fox", 42, 1440, 1440)
	if err != nil || contentType != "image/png" {
		t.Fatal(contentType, err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() != 1440 || img.Bounds().Dy() != 1440 || len(b) < 6_000_000 {
		t.Fatalf("%v %v, %d bytes", err, img.Bounds(), len(b))
	}
	again, _, _ := render.EncodeFull("png", "a red fox", 42, 1440, 1440)
	if !bytes.Equal(b, again) {
		t.Fatal("not deterministic")
	}
}
