// Package preview makes the scaled-down copy of a kept image that an agent gets embedded when
// the original is larger than its client takes: a JPEG no larger than a byte bound, its longest
// side at most MaxSide pixels. An MCP client gets the whole image from the tool result or not
// at all, and a 4-megapixel PNG is many MiB; the preview is what the agent sees at once, and
// the original stays readable by reference (hubu://images/<public handle>).
package preview

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	_ "image/png" // decoders of the kept types
	"math"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"
)

const (
	// MaxSide is the longest side of a preview, in pixels.
	MaxSide = 1024
	// MaxBytes is the default bound on a preview's size: well within the 1 MiB the router
	// embeds by default.
	MaxBytes = 512 << 10
	// maxPixels bounds the images decoded (FLUX's largest outputs are about 4 megapixels); a
	// larger one is refused before its pixels are allocated.
	maxPixels = 64 << 20
	// minSide is the smallest side a preview is shrunk to while looking for maxBytes.
	minSide = 64
)

// Preview is a scaled JPEG copy of an image.
type Preview struct {
	Bytes         []byte
	Width, Height int
}

// MIMEType is every preview's type.
const MIMEType = "image/jpeg"

// Size returns the width and height of an encoded PNG, JPEG or WebP image without decoding its
// pixels.
func Size(b []byte) (width, height int, err error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return 0, 0, fmt.Errorf("read the image's size: %w", err)
	}
	return cfg.Width, cfg.Height, nil
}

// Make decodes b (PNG, JPEG or WebP) and returns a JPEG copy no larger than maxBytes, its
// longest side at most MaxSide: the quality is lowered first, then the sides, until it fits.
// Transparent pixels are drawn on white.
func Make(b []byte, maxBytes int) (Preview, error) {
	w, h, err := Size(b)
	if err != nil {
		return Preview{}, err
	}
	if w <= 0 || h <= 0 || int64(w)*int64(h) > maxPixels {
		return Preview{}, fmt.Errorf("the image is %dx%d pixels: more than a preview is made of", w, h)
	}
	src, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return Preview{}, fmt.Errorf("decode the image: %w", err)
	}
	for side := min(MaxSide, max(w, h)); ; side = side * 3 / 4 {
		pw, ph := fit(w, h, side)
		scaled := image.NewRGBA(image.Rect(0, 0, pw, ph))
		draw.Draw(scaled, scaled.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
		draw.CatmullRom.Scale(scaled, scaled.Bounds(), src, src.Bounds(), draw.Over, nil)
		for _, quality := range []int{85, 70, 55} {
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, scaled, &jpeg.Options{Quality: quality}); err != nil {
				return Preview{}, fmt.Errorf("encode the preview: %w", err)
			}
			if buf.Len() <= maxBytes {
				return Preview{Bytes: buf.Bytes(), Width: pw, Height: ph}, nil
			}
		}
		if side*3/4 < minSide {
			return Preview{}, errors.New("no preview of the image fits the size bound")
		}
	}
}

// fit scales w×h so that its longest side is side, keeping the aspect ratio (each side at
// least one pixel).
func fit(w, h, side int) (int, int) {
	if w >= h {
		return side, max(1, int(math.Round(float64(h)*float64(side)/float64(w))))
	}
	return max(1, int(math.Round(float64(w)*float64(side)/float64(h)))), side
}
