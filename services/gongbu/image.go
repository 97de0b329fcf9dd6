package gongbu

import (
	"context"
	"crypto/sha256"
	"fmt"

	"hubu.dev/hubu/proto/contract"
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

// NewImage checks what a provider delivered: a non-empty image of a kept type, no larger than
// MaxImageBytes, whose bytes are what its declared type says (contract.CheckImage).
func NewImage(mimeType string, b []byte) (Image, error) {
	if len(b) > MaxImageBytes {
		return Image{}, fmt.Errorf("the provider delivered an image larger than %d bytes", MaxImageBytes)
	}
	if err := contract.CheckImage(mimeType, b); err != nil {
		return Image{}, fmt.Errorf("the provider delivered what is not a kept image: %w", err)
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
