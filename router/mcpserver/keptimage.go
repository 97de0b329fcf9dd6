package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"

	"hubu.dev/hubu/proto/gongbuapi"
)

// Results by reference. Gongbu downloads a provider's result when it records the success and
// keeps it (the provider's delivery URL expires within minutes); the router embeds the image
// from Gongbu, and its registry keeps only a reference to it (keptRef), never the bytes, so a
// registry shared by a fleet of routers stays small. A redelivery of the call embeds the image
// from Gongbu again.

// keptRef is the image Gongbu keeps for an operation, as the registry records it: enough to
// fetch it, or its preview, by the operation's public handle and to check that what comes back
// is that image.
type keptRef struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size_bytes"`
	Width  int    `json:"width,omitempty"`
	Height int    `json:"height,omitempty"`
	// Preview is the scaled JPEG copy Gongbu keeps of an image larger than 512 KiB: what the
	// answer embeds when the image is larger than the router embeds.
	Preview *keptPreview `json:"preview,omitempty"`
}

type keptPreview struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size_bytes"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// refOf is the reference to the image k describes.
func refOf(k *gongbuapi.KeptImage) *keptRef {
	ref := &keptRef{SHA256: k.Sha256, Size: k.SizeBytes, Width: deref(k.Width), Height: deref(k.Height)}
	if p := k.Preview; p != nil {
		ref.Preview = &keptPreview{SHA256: p.Sha256, Size: p.SizeBytes, Width: p.Width, Height: p.Height}
	}
	return ref
}

// embedded is the image an answer carries as MCP image content: the kept image, or its preview.
type embedded struct {
	data    []byte
	preview bool
}

// result is what an answer says of a succeeded execution's image: the provider's link, the
// original's description and resource URI, the image to embed (nil when there is none to
// embed) and Gongbu's reference to it, when Gongbu keeps it. An execution Gongbu keeps no
// image for (the download is still being tried, or a Gongbu from before results by reference)
// has its image downloaded from the provider's link, as long as that works.
func (r *Router) result(ctx context.Context, handle string, res *gongbuapi.ExecutionResult) (*ImageResult, *embedded, *keptRef) {
	out := &ImageResult{ImageURL: res.ImageUrl}
	k := res.Image
	if k == nil {
		img, mimeType := r.fetchImage(ctx, res.ImageUrl)
		out.MIMEType = mimeType
		if img == nil {
			return out, nil, nil
		}
		return out, &embedded{data: img}, nil
	}
	out.MIMEType = string(k.MimeType)
	ref := refOf(k)
	if k.Data != nil && r.embeddable(ref.SHA256, ref.Size, *k.Data) {
		r.kept.put(handle, ref.SHA256, *k.Data)
		return out, &embedded{data: *k.Data}, ref
	}
	if p := k.Preview; p != nil && p.Data != nil && ref.Size > r.cfg.ImageLimit && r.embeddable(p.Sha256, p.SizeBytes, *p.Data) {
		r.kept.put(handle, p.Sha256, *p.Data)
		return out, &embedded{data: *p.Data, preview: true}, ref
	}
	if k.Data != nil || (k.Preview != nil && k.Preview.Data != nil) {
		r.cfg.Logger.ErrorContext(ctx, "Gongbu embedded an image other than the one it described; fetching it instead", "public_handle", handle)
	}
	return out, r.keptImage(ctx, handle, ref), ref
}

// embedImage is what the router asks Gongbu to embed in an execution's answer (see result):
// an image it would embed in its own answer, so that a new spend needs no second request; no
// more than Gongbu's API takes (maxEmbed). Gongbu embeds the image's preview when the image is
// larger and the preview is not.
func (r *Router) embedImage() *int64 {
	limit := min(r.cfg.ImageLimit, maxEmbed)
	return &limit
}

// maxEmbed is the largest embed_image Gongbu's API takes (proto/gongbu.openapi.yaml), the
// largest image it keeps.
const maxEmbed = 32 << 20

// embeddable reports whether img, embedded by Gongbu or fetched from it, is the image of that
// digest and size, and no larger than the router embeds.
func (r *Router) embeddable(sha string, size int64, img []byte) bool {
	sum := sha256.Sum256(img)
	return int64(len(img)) == size && size <= r.cfg.ImageLimit && hex.EncodeToString(sum[:]) == sha
}

// keptImage fetches what an answer embeds of the image Gongbu keeps for the operation of
// handle: the image when it is no larger than ImageLimit, else its preview when that is no
// larger; nil when neither fits, neither can be fetched within KeptImageWait, or what came is
// not what ref names. The images embedded most recently are held in memory for the
// redeliveries that follow.
func (r *Router) keptImage(ctx context.Context, handle string, ref *keptRef) *embedded {
	switch {
	case ref == nil:
		return nil
	case ref.Size <= r.cfg.ImageLimit:
		if img := r.fetchKept(ctx, handle, ref.SHA256, ref.Size, false); img != nil {
			return &embedded{data: img}
		}
	case ref.Preview != nil && ref.Preview.Size <= r.cfg.ImageLimit:
		if img := r.fetchKept(ctx, handle, ref.Preview.SHA256, ref.Preview.Size, true); img != nil {
			return &embedded{data: img, preview: true}
		}
	}
	return nil
}

// fetchKept fetches the kept image of handle, or its preview, whose digest and size are sha
// and size (from the cache when it holds it).
func (r *Router) fetchKept(ctx context.Context, handle, sha string, size int64, preview bool) []byte {
	if img := r.kept.get(handle, sha); img != nil {
		return img
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.KeptImageWait)
	defer cancel()
	var params *gongbuapi.GetOperationImageParams
	if preview {
		params = &gongbuapi.GetOperationImageParams{Preview: &preview}
	}
	resp, err := r.cfg.Gongbu.GetOperationImage(ctx, handle, params)
	if err != nil {
		r.cfg.Logger.WarnContext(ctx, "could not fetch a kept image from Gongbu", "public_handle", handle, "err", err)
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, r.cfg.ImageLimit+1))
	if err != nil || resp.StatusCode != http.StatusOK {
		r.cfg.Logger.WarnContext(ctx, "could not fetch a kept image from Gongbu", "public_handle", handle, "status", resp.StatusCode)
		return nil
	}
	if !r.embeddable(sha, size, b) {
		r.cfg.Logger.ErrorContext(ctx, "Gongbu served an image other than the one it described; not embedded", "public_handle", handle)
		return nil
	}
	r.kept.put(handle, sha, b)
	return b
}

// withKeptImage is a recorded answer about to be replayed, with its image fetched from Gongbu
// again.
func (r *Router) withKeptImage(ctx context.Context, a answer) answer {
	if a.kept != nil && a.image == nil {
		a.image = r.keptImage(ctx, a.PublicHandle, a.kept)
	}
	return a
}

// deref is *p, or the zero value for an absent optional field.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
