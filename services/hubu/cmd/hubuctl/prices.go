package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"hubu.dev/hubu/proto/hubuapi"
)

var pricesCommand = &command{UsageLine: "prices", Commands: []*command{
	{UsageLine: "list", Short: "the price catalog", Run: (*cli).pricesList},
	{UsageLine: "set --provider P --model M (--size S --amount-micros N | --first-mp-micros N --extra-mp-micros N --input-mp-micros N) [--currency USD]",
		Run: (*cli).pricesSet,
		Long: `Creates or changes one catalog entry. Operations already authorized keep their amount.

A flat price is an amount an image; a per-megapixel price is BFL's FLUX.2 scheme: the first
megapixel of output, each further one, and each megapixel of an edit's input images (a megapixel
is 2^20 pixels; the output's count and the inputs' are each rounded up). A per-megapixel price
covers every size of its model.

  --provider P           provider name, e.g. bfl (required)
  --model M              model name, e.g. flux-2-pro (required)
  --size S               a flat price's size: WIDTHxHEIGHT, W:H (an aspect ratio), or '*' for any
                         size without an entry of its own
  --amount-micros N      a flat price, in micro-units: 25000 = 0.025
  --first-mp-micros N    a per-megapixel price: the first megapixel of output
  --extra-mp-micros N    a per-megapixel price: each further megapixel of output
  --input-mp-micros N    a per-megapixel price: each megapixel of the input images
  --currency CODE        ISO 4217 code (default USD)`},
}}

func (c *cli) pricesList(ctx context.Context, fs *flag.FlagSet, args []string) error {
	if _, err := c.parse(fs, args, 0, ""); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.ListPricesWithResponse(ctx)
	return show(c, resp, err, (*hubuapi.ListPricesResponse).GetJSON200, func(l *hubuapi.PriceList) error {
		return writePrices(c.stdout, l.Prices)
	})
}

func writePrices(w io.Writer, prices []hubuapi.Price) error {
	if len(prices) == 0 {
		_, err := fmt.Fprintln(w, "The price catalog is empty.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "PROVIDER\tMODEL\tSIZE\tPRICE\tUPDATED")
	for _, p := range prices {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", clean(p.Provider), clean(p.Model), clean(p.Size), describePrice(p), formatTime(p.UpdatedAt))
	}
	return tw.Flush()
}

// describePrice is a price in words: an amount an image, or its per-megapixel amounts.
func describePrice(p hubuapi.Price) string {
	if p.Rule == hubuapi.Megapixel && p.ExtraMpMicros != nil && p.InputMpMicros != nil {
		return fmt.Sprintf("%s first MP, +%s per further MP, +%s per input MP", formatAmount(p.AmountMicros, p.Currency),
			formatAmount(*p.ExtraMpMicros, p.Currency), formatAmount(*p.InputMpMicros, p.Currency))
	}
	return formatAmount(p.AmountMicros, p.Currency) + " an image"
}

func (c *cli) pricesSet(ctx context.Context, fs *flag.FlagSet, args []string) error {
	provider := fs.String("provider", "", "")
	model := fs.String("model", "", "")
	size := fs.String("size", "", "")
	amount := fs.Int64("amount-micros", 0, "")
	first := fs.Int64("first-mp-micros", 0, "")
	extra := fs.Int64("extra-mp-micros", 0, "")
	input := fs.Int64("input-mp-micros", 0, "")
	currency := fs.String("currency", "USD", "")
	if _, err := c.parse(fs, args, 0, ""); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	perMP := given["first-mp-micros"] || given["extra-mp-micros"] || given["input-mp-micros"]
	required := []string{"provider", "model", "size", "amount-micros"}
	if perMP {
		required = []string{"provider", "model", "first-mp-micros", "extra-mp-micros", "input-mp-micros"}
	}
	for _, req := range required {
		if !given[req] {
			return usagef("hubuctl prices set: --%s is required (see hubuctl prices set --help)", req)
		}
	}
	switch {
	case perMP && given["amount-micros"]:
		return usagef("hubuctl prices set: give --amount-micros (a flat price) or the three --*-mp-micros (a per-megapixel price), not both")
	case *amount < 0 || *first < 0 || *extra < 0 || *input < 0:
		return usagef("hubuctl prices set: amounts must not be negative")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	update := hubuapi.PriceUpdate{Provider: *provider, Model: *model, Size: *size, AmountMicros: *amount,
		Currency: strings.ToUpper(strings.TrimSpace(*currency))}
	if perMP {
		rule := hubuapi.Megapixel
		update.Rule, update.AmountMicros, update.ExtraMpMicros, update.InputMpMicros = &rule, *first, extra, input
		if !given["size"] {
			update.Size = "*"
		}
	}
	resp, err := cl.SetPriceWithResponse(ctx, update)
	return show(c, resp, err, (*hubuapi.SetPriceResponse).GetJSON200, func(p *hubuapi.Price) error {
		fmt.Fprint(c.stdout, "Price set.\n\n")
		return writePrices(c.stdout, []hubuapi.Price{*p})
	})
}
