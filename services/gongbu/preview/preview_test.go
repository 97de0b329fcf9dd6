package preview_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"testing"

	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/preview"
)

// A multi-megapixel result gets a JPEG copy within the bound, at most MaxSide on its longest
// side, with the original's aspect ratio.
func TestPreviewOfALargeImage(t *testing.T) {
	t.Parallel()
	original := gongbutest.NoisyPNG(2048, 1536, 7) // about 12 MiB: noise does not compress
	if w, h, err := preview.Size(original); err != nil || w != 2048 || h != 1536 {
		t.Fatalf("Size: %dx%d, %v", w, h, err)
	}
	p, err := preview.Make(original, preview.MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Bytes) > preview.MaxBytes || p.Width > preview.MaxSide || p.Height > preview.MaxSide || p.Width*3 != p.Height*4 {
		t.Fatalf("preview %dx%d, %d bytes, of a 2048x1536 image of %d bytes", p.Width, p.Height, len(p.Bytes), len(original))
	}
	img, err := jpeg.Decode(bytes.NewReader(p.Bytes))
	if err != nil || img.Bounds().Dx() != p.Width || img.Bounds().Dy() != p.Height {
		t.Fatalf("the preview is not the JPEG it says: %v %v", err, img.Bounds())
	}
	// A tighter bound gives a smaller copy, never one above it.
	small, err := preview.Make(original, 64<<10)
	if err != nil || len(small.Bytes) > 64<<10 || small.Width >= p.Width {
		t.Fatalf("64 KiB bound: %dx%d, %d bytes, %v", small.Width, small.Height, len(small.Bytes), err)
	}
}

// Transparent pixels come out white, not black, in the JPEG.
func TestPreviewDrawsTransparencyOnWhite(t *testing.T) {
	t.Parallel()
	img := image.NewNRGBA(image.Rect(0, 0, 40, 20)) // all transparent
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	p, err := preview.Make(buf.Bytes(), preview.MaxBytes)
	if err != nil || p.Width != 40 || p.Height != 20 { // never scaled up
		t.Fatalf("%dx%d %v", p.Width, p.Height, err)
	}
	out, err := jpeg.Decode(bytes.NewReader(p.Bytes))
	if err != nil {
		t.Fatal(err)
	}
	if r, g, b, _ := out.At(10, 10).RGBA(); r>>8 < 250 || g>>8 < 250 || b>>8 < 250 {
		t.Fatalf("a transparent pixel became %v", color.RGBAModel.Convert(out.At(10, 10)))
	}
}

// An image claiming more pixels than any provider delivers is refused from its header, before
// its pixels are allocated; bytes that are no image are refused too.
func TestPreviewRefuses(t *testing.T) {
	t.Parallel()
	if _, err := preview.Make(pngHeader(40000, 40000), preview.MaxBytes); err == nil {
		t.Fatal("a 1.6-gigapixel header was decoded")
	}
	if _, err := preview.Make([]byte("not an image"), preview.MaxBytes); err == nil {
		t.Fatal("not an image, previewed")
	}
}

// pngHeader is the signature and IHDR chunk of a w×h RGBA PNG, and nothing else.
func pngHeader(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32([]byte("IHDR"), w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0)
	out := append([]byte("\x89PNG\r\n\x1a\n"), binary.BigEndian.AppendUint32(nil, 13)...)
	out = append(out, ihdr...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(ihdr))
}

func BenchmarkPreviewOfA4MPImage(b *testing.B) {
	original := gongbutest.NoisyPNG(2048, 2048, 7)
	for b.Loop() {
		if _, err := preview.Make(original, preview.MaxBytes); err != nil {
			b.Fatal(err)
		}
	}
}
