package gongbu

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
)

// MaxImageBytes is the largest image Gongbu keeps (FLUX's largest outputs are a few MiB).
const MaxImageBytes = 32 << 20

// Image is a result a provider delivered, downloaded while its delivery URL still worked.
type Image struct {
	MIMEType string
	Bytes    []byte
}

// ImageInfo describes an image Gongbu keeps, without its bytes.
type ImageInfo struct {
	MIMEType string
	Size     int
	SHA256   [sha256.Size]byte
}

// Info describes img.
func (img Image) Info() ImageInfo {
	return ImageInfo{MIMEType: img.MIMEType, Size: len(img.Bytes), SHA256: sha256.Sum256(img.Bytes)}
}

// imageTypes are the image types Gongbu keeps; the provider's Content-Type must name one of
// them and the bytes must be one.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/webp": true}

// NewImage checks what a provider delivered: a non-empty image of a kept type, no larger than
// MaxImageBytes, whose bytes are what its declared type says.
func NewImage(mimeType string, b []byte) (Image, error) {
	switch {
	case !imageTypes[mimeType]:
		return Image{}, fmt.Errorf("the provider delivered %q, not a PNG, JPEG or WebP image", mimeType)
	case len(b) == 0:
		return Image{}, fmt.Errorf("the provider delivered an empty image")
	case len(b) > MaxImageBytes:
		return Image{}, fmt.Errorf("the provider delivered an image larger than %d bytes", MaxImageBytes)
	}
	if sniffed := http.DetectContentType(b); sniffed != mimeType {
		return Image{}, fmt.Errorf("the provider declared %s but delivered %s", mimeType, sniffed)
	}
	return Image{MIMEType: mimeType, Bytes: b}, nil
}

// ResultFetcher is a provider whose delivery URLs expire: Gongbu downloads each result once,
// keeps it, and serves it from then on.
type ResultFetcher interface {
	// FetchResult downloads the result a poll answered Ready with.
	FetchResult(ctx context.Context, url string) (Image, error)
}

// WithImage is a success that comes with the image it delivered.
func (o Outcome) WithImage(img *Image) Outcome {
	if o.State == StateSucceeded {
		o.Image = img
	}
	return o
}
