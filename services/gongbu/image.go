package gongbu

import (
	"context"
	"crypto/sha256"
	"fmt"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/services/gongbu/preview"
)

// MaxImageBytes is the largest image Gongbu keeps (FLUX's largest outputs are a few MiB).
const MaxImageBytes = 32 << 20

// Image is a result a provider delivered, downloaded while its delivery URL still worked.
type Image struct {
	MIMEType string
	Bytes    []byte
	// Width and Height are the image's sides in pixels, 0 until Prepare has read them.
	Width, Height int
	// Preview is the scaled JPEG copy embedded in place of an image larger than an agent's
	// client takes; nil for an image no larger than PreviewAbove.
	Preview *Preview
}

// Preview is a scaled JPEG copy of a kept image (preview.MIMEType).
type Preview struct {
	Bytes         []byte
	Width, Height int
}

// PreviewAbove is the size above which a kept image gets a preview, and the bound on the
// preview's own size: a result of any size has a copy to embed no larger than this.
const PreviewAbove = preview.MaxBytes

// Embedded is what an answer embeds of a kept image: the image, or its preview.
type Embedded struct {
	Bytes   []byte
	Preview bool
}

// ImageInfo describes an image Gongbu keeps, without its bytes.
type ImageInfo struct {
	MIMEType string
	Size     int
	SHA256   [sha256.Size]byte
	// Width and Height are 0 for an image kept before Gongbu recorded sides.
	Width, Height int
	Preview       *PreviewInfo
}

// PreviewInfo describes a kept image's preview, without its bytes.
type PreviewInfo struct {
	Size          int
	SHA256        [sha256.Size]byte
	Width, Height int
}

// Info describes img.
func (img Image) Info() ImageInfo {
	info := ImageInfo{MIMEType: img.MIMEType, Size: len(img.Bytes), SHA256: sha256.Sum256(img.Bytes), Width: img.Width, Height: img.Height}
	if p := img.Preview; p != nil {
		info.Preview = &PreviewInfo{Size: len(p.Bytes), SHA256: sha256.Sum256(p.Bytes), Width: p.Width, Height: p.Height}
	}
	return info
}

// Prepare reads the image's sides and, for an image larger than PreviewAbove, makes its
// preview. An image it cannot read is still kept, without them: the error says why.
func (img *Image) Prepare() error {
	w, h, err := preview.Size(img.Bytes)
	if err != nil {
		return err
	}
	img.Width, img.Height = w, h
	if len(img.Bytes) <= PreviewAbove {
		return nil
	}
	p, err := preview.Make(img.Bytes, PreviewAbove)
	if err != nil {
		return err
	}
	img.Preview = &Preview{Bytes: p.Bytes, Width: p.Width, Height: p.Height}
	return nil
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
