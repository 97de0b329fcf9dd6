package gongbutest

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"sync"

	"hubu.dev/hubu/services/gongbu"
)

// FetchFunc scripts one FetchResult call.
type FetchFunc func(ctx context.Context, url string) (gongbu.Image, error)

// ImageProvider is a Provider whose results expire, so Gongbu downloads them: each
// FetchResult takes the next scripted answer, and with none left delivers TinyPNG.
type ImageProvider struct {
	*Provider

	mu      sync.Mutex
	fetches []FetchFunc
	fetched []string
}

var _ gongbu.ResultFetcher = (*ImageProvider)(nil)

// NewImageProvider returns a fake provider whose results Gongbu downloads.
func NewImageProvider(honours bool) *ImageProvider {
	return &ImageProvider{Provider: NewProvider(honours)}
}

// OnFetch scripts the next FetchResult calls, in order.
func (p *ImageProvider) OnFetch(fs ...FetchFunc) {
	under(&p.mu, func() { p.fetches = append(p.fetches, fs...) })
}

// Fetched returns the URLs downloaded, in order.
func (p *ImageProvider) Fetched() []string {
	return locked(&p.mu, func() []string { return append([]string(nil), p.fetched...) })
}

func (p *ImageProvider) FetchResult(ctx context.Context, url string) (gongbu.Image, error) {
	p.mu.Lock()
	p.fetched = append(p.fetched, url)
	var f FetchFunc
	if len(p.fetches) > 0 {
		f, p.fetches = p.fetches[0], p.fetches[1:]
	}
	p.mu.Unlock()
	if f != nil {
		return f(ctx, url)
	}
	return gongbu.NewImage("image/png", TinyPNG)
}

// FetchError is a download that fails.
func FetchError() FetchFunc {
	return func(context.Context, string) (gongbu.Image, error) {
		return gongbu.Image{}, errors.New("sample download failed (test)")
	}
}

// TinyPNG is a valid 1×1 PNG.
var TinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

// NoisyPNG is a width×height PNG of pseudo-random pixels from seed: as large as an image of
// that size gets (noise does not compress), the stand-in for a provider's multi-megapixel
// result.
func NoisyPNG(width, height int, seed uint64) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, width, height))
	x := seed | 1
	for i := range img.Pix {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		img.Pix[i] = byte(x)
		if i%4 == 3 {
			img.Pix[i] = 255 // opaque
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Deliver is a download that delivers b as mimeType.
func Deliver(mimeType string, b []byte) FetchFunc {
	return func(context.Context, string) (gongbu.Image, error) { return gongbu.NewImage(mimeType, b) }
}
