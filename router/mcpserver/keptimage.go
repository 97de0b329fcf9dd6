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
// fetch it by the operation's public handle and to check that what comes back is that image.
type keptRef struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size_bytes"`
}

// result is what an answer says of a succeeded execution's image: the provider's link, the
// image to embed (nil when there is none to embed) and Gongbu's reference to it, when Gongbu
// keeps it. An execution Gongbu keeps no image for (the download is still being tried, or a
// Gongbu from before results by reference) has its image downloaded from the provider's link,
// as long as that works.
func (r *Router) result(ctx context.Context, handle string, res *gongbuapi.ExecutionResult) (*ImageResult, []byte, *keptRef) {
	out := &ImageResult{ImageURL: res.ImageUrl}
	k := res.Image
	if k == nil {
		img, mimeType := r.fetchImage(ctx, res.ImageUrl)
		out.MIMEType = mimeType
		return out, img, nil
	}
	out.MIMEType = string(k.MimeType)
	ref := &keptRef{SHA256: k.Sha256, Size: k.SizeBytes}
	if k.Data != nil && r.embeddable(ref, *k.Data) {
		r.kept.put(handle, ref.SHA256, *k.Data)
		return out, *k.Data, ref
	}
	if k.Data != nil {
		r.cfg.Logger.ErrorContext(ctx, "Gongbu embedded an image other than the one it described; fetching it instead", "public_handle", handle)
	}
	return out, r.keptImage(ctx, handle, ref), ref
}

// embedImage is what the router asks Gongbu to embed in an execution's answer (see result):
// an image it would embed in its own answer, so that a new spend needs no second request; no
// more than Gongbu's API takes (maxEmbed).
func (r *Router) embedImage() *int64 {
	limit := min(r.cfg.ImageLimit, maxEmbed)
	return &limit
}

// maxEmbed is the largest embed_image Gongbu's API takes (proto/gongbu.openapi.yaml), the
// largest image it keeps.
const maxEmbed = 32 << 20

// embeddable reports whether img, embedded by Gongbu or fetched from it, is the image ref
// names, and no larger than the router embeds.
func (r *Router) embeddable(ref *keptRef, img []byte) bool {
	sum := sha256.Sum256(img)
	return int64(len(img)) <= r.cfg.ImageLimit && hex.EncodeToString(sum[:]) == ref.SHA256
}

// keptImage fetches the image Gongbu keeps for the operation of handle, to embed it; nil when
// it is larger than ImageLimit (it is linked only), cannot be fetched within KeptImageWait, or
// is not the image ref names. The images embedded most recently are held in memory for the redeliveries that
// follow.
func (r *Router) keptImage(ctx context.Context, handle string, ref *keptRef) []byte {
	if ref == nil || ref.Size > r.cfg.ImageLimit {
		return nil
	}
	if img := r.kept.get(handle, ref.SHA256); img != nil {
		return img
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.KeptImageWait)
	defer cancel()
	resp, err := r.cfg.Gongbu.GetOperationImage(ctx, handle)
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
	if !r.embeddable(ref, b) {
		r.cfg.Logger.ErrorContext(ctx, "Gongbu served an image other than the one it described; not embedded", "public_handle", handle)
		return nil
	}
	r.kept.put(handle, ref.SHA256, b)
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
