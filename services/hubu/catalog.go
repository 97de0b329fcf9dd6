package hubu

import (
	"fmt"

	"hubu.dev/hubu/proto/contract"
)

// Catalog is the price list, as it stands at one moment.
type Catalog []Price

// PriceOf is the price that applies to scope: the entry for its exact size, else its model's
// "*" entry. A model the catalog does not list, or a size it has no price for, is the
// caller's error.
func (c Catalog) PriceOf(scope Scope) (Price, error) {
	var anySize *Price
	known := false
	for i := range c {
		p := &c[i]
		if p.Provider != scope.Provider || p.Model != scope.Model {
			continue
		}
		known = true
		switch p.Size {
		case scope.Size:
			return *p, nil
		case "*":
			anySize = p
		}
	}
	switch {
	case anySize != nil:
		return *anySize, nil
	case !known:
		return Price{}, Errorf(CodeInvalidArguments, "unknown model %q", scope.Model)
	}
	return Price{}, Errorf(CodeInvalidArguments, "model %q has no price for size %s", scope.Model, scope.Size)
}

// Price rules.
const (
	// PriceFlat: AmountMicros an image, whatever its size.
	PriceFlat = "flat"
	// PriceMegapixel: as BFL prices FLUX.2, AmountMicros for the first megapixel of output,
	// ExtraMPMicros for each further one, InputMPMicros for each megapixel of the input images.
	PriceMegapixel = "megapixel"
)

// maxInputPixels is the most of one input image BFL counts: it shrinks a larger one to 4 MP.
const maxInputPixels = 4 * contract.Megapixel

// AmountFor is what one operation costs at p: size is the scope's (WxH, needed by a
// per-megapixel price), inputs the input images' sizes. BFL reports megapixels of 2^20 pixels;
// how it rounds them is not documented, so each count is rounded up (the output's, and the
// inputs' together, each input at most 4 MP as BFL shrinks it): the hold is never below what
// BFL charges, and what it states it charged is what is captured.
func (p Price) AmountFor(size string, inputs []contract.Dimensions) (int64, error) {
	if p.Rule != PriceMegapixel {
		return p.AmountMicros, nil
	}
	out, ok := contract.ParseSize(size)
	if !ok {
		return 0, Errorf(CodeInvalidArguments, "model %q is priced per megapixel but its size %s is not in pixels", p.Model, size)
	}
	var in int64
	for _, d := range inputs {
		in += min(d.Pixels(), maxInputPixels)
	}
	outMP, inMP := megapixels(out.Pixels()), megapixels(in)
	return p.AmountMicros + (outMP-1)*p.ExtraMPMicros + inMP*p.InputMPMicros, nil
}

// megapixels is px in BFL's megapixels, rounded up; at least 1 for any pixels at all.
func megapixels(px int64) int64 { return (px + contract.Megapixel - 1) / contract.Megapixel }

// Describe says what p costs, in words for an operator or an agent.
func (p Price) Describe() string {
	if p.Rule == PriceMegapixel {
		return fmt.Sprintf("%s for the first megapixel, %s for each further megapixel, %s for each megapixel of input images",
			FormatMoney(p.AmountMicros, p.Currency), FormatMoney(p.ExtraMPMicros, p.Currency), FormatMoney(p.InputMPMicros, p.Currency))
	}
	return FormatMoney(p.AmountMicros, p.Currency) + " an image"
}
