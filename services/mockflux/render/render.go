// Package render draws mockflux's stand-in images: small, real PNG or JPEG files whose
// colours and pattern come from sha256(prompt, seed), so the same prompt and seed always
// give the same bytes and another seed gives another image.
package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"sync"

	"hubu.dev/hubu/proto/contract"
)

// Scale is how much smaller than the requested size the image is drawn; a mock has no
// reason to ship megapixels.
const Scale = 16

// DefaultSide is the side of the image when no size was requested (flux-pro-1.1-ultra).
const DefaultSide = 64

// Image draws the image for prompt and seed at the requested size scaled down by Scale.
func Image(prompt string, seed int64, width, height int) *image.NRGBA {
	w, h := DefaultSide, DefaultSide
	if width > 0 && height > 0 {
		w, h = max(1, width/Scale), max(1, height/Scale)
	}
	sum := digest(prompt, seed)
	from := color.NRGBA{sum[0], sum[1], sum[2], 255}
	to := color.NRGBA{sum[3], sum[4], sum[5], 255}
	accent := color.NRGBA{sum[6], sum[7], sum[8], 255}
	// A 4x4 grid of cells, each either the gradient or the accent colour, chosen by the
	// bits of two more digest bytes.
	cells := binary.BigEndian.Uint16(sum[9:11])

	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			cell := (y*4/h)*4 + x*4/w
			if cells&(1<<cell) != 0 && (x+y)%2 == 0 {
				img.SetNRGBA(x, y, accent)
				continue
			}
			t := float64(x+y) / float64(max(1, w+h-2))
			img.SetNRGBA(x, y, color.NRGBA{lerp(from.R, to.R, t), lerp(from.G, to.G, t), lerp(from.B, to.B, t), 255})
		}
	}
	return img
}

// Encode draws the image for prompt and seed in format (contract.FormatPNG or
// contract.FormatJPEG; PNG for any other) and returns it with its content type.
func Encode(format, prompt string, seed int64, width, height int) ([]byte, string, error) {
	var buf bytes.Buffer
	img := Image(prompt, seed, width, height)
	if format == contract.FormatJPEG {
		err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
		return buf.Bytes(), "image/jpeg", err
	}
	err := pngEncoder.Encode(&buf, img)
	return buf.Bytes(), "image/png", err
}

// EncodeFull draws the image at the requested size itself (DefaultFullSide square when none
// was asked for), the stand-in's gradient overlaid with noise from prompt and seed, so that it
// is as large as a real result of that size (noise does not compress: a 1440x1440 PNG is about
// 6 MiB). For tests of results larger than an agent's client takes embedded.
func EncodeFull(format, prompt string, seed int64, width, height int) ([]byte, string, error) {
	if width <= 0 || height <= 0 {
		width, height = DefaultFullSide, DefaultFullSide
	}
	sum := digest(prompt, seed)
	from := color.NRGBA{sum[0], sum[1], sum[2], 255}
	to := color.NRGBA{sum[3], sum[4], sum[5], 255}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	x := binary.BigEndian.Uint64(sum[16:24]) | 1
	for py := range height {
		for px := range width {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			t := float64(px+py) / float64(max(1, width+height-2))
			c := color.RGBA{lerp(from.R, to.R, t) ^ byte(x), lerp(from.G, to.G, t) ^ byte(x>>8), lerp(from.B, to.B, t) ^ byte(x>>16), 255}
			img.SetRGBA(px, py, c)
		}
	}
	var buf bytes.Buffer
	if format == contract.FormatJPEG {
		err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95})
		return buf.Bytes(), "image/jpeg", err
	}
	err := pngEncoder.Encode(&buf, img)
	return buf.Bytes(), "image/png", err
}

// DefaultFullSide is EncodeFull's side when no size was requested.
const DefaultFullSide = 1024

// pngEncoder reuses its compressor between images (making one is most of the cost of
// encoding an image this small); the bytes are the same as png.Encode's.
var pngEncoder = png.Encoder{BufferPool: &encoderPool{}}

type encoderPool struct{ pool sync.Pool }

func (p *encoderPool) Get() *png.EncoderBuffer {
	b, _ := p.pool.Get().(*png.EncoderBuffer)
	return b
}

func (p *encoderPool) Put(b *png.EncoderBuffer) { p.pool.Put(b) }

func digest(prompt string, seed int64) [sha256.Size]byte {
	return sha256.Sum256(binary.BigEndian.AppendUint64([]byte(prompt+"\x00"), uint64(seed)))
}

func lerp(a, b uint8, t float64) uint8 {
	return uint8(float64(a) + (float64(b)-float64(a))*t + 0.5)
}
