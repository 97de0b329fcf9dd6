package flux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"

	"hubu.dev/hubu/services/gongbu"
)

var _ gongbu.ResultFetcher = (*Adapter)(nil)

// FetchResult downloads a Ready job's sample. The URL must be one Poll took (sampleURL); the
// API key is never sent with it (a sample URL carries its own signature), a redirect is not
// followed, and without an allow-list of sample hosts only a public address is connected to.
func (a *Adapter) FetchResult(ctx context.Context, sampleURL string) (gongbu.Image, error) {
	u, err := a.sampleURL(sampleURL)
	if err != nil {
		return gongbu.Image{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return gongbu.Image{}, fmt.Errorf("download the sample: %w", err)
	}
	resp, err := a.images.Do(req)
	if err != nil {
		// Not the *url.Error itself: it names the whole URL, signature included.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return gongbu.Image{}, fmt.Errorf("download the sample from %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return gongbu.Image{}, fmt.Errorf("download the sample: the provider answered %d", resp.StatusCode)
	}
	mimeType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(io.LimitReader(resp.Body, gongbu.MaxImageBytes+1))
	if err != nil {
		return gongbu.Image{}, fmt.Errorf("download the sample: %w", err)
	}
	return gongbu.NewImage(mimeType, b)
}
