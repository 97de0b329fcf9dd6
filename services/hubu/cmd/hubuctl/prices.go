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
	{UsageLine: "set --provider P --model M --size S --amount-micros N [--currency USD]", Run: (*cli).pricesSet,
		Long: `Creates or changes one catalog entry. Operations already authorized keep their amount.

  --provider P        provider name, e.g. bfl (required)
  --model M           model name, e.g. flux-dev (required)
  --size S            WIDTHxHEIGHT, or '*' for any size without an entry of its own (required)
  --amount-micros N   price in micro-units, 25000 = 0.025 (required)
  --currency CODE     ISO 4217 code (default USD)`},
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
	fmt.Fprintln(tw, "PROVIDER\tMODEL\tSIZE\tAMOUNT\tUPDATED")
	for _, p := range prices {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", clean(p.Provider), clean(p.Model), clean(p.Size), formatAmount(p.AmountMicros, p.Currency), formatTime(p.UpdatedAt))
	}
	return tw.Flush()
}

func (c *cli) pricesSet(ctx context.Context, fs *flag.FlagSet, args []string) error {
	provider := fs.String("provider", "", "")
	model := fs.String("model", "", "")
	size := fs.String("size", "", "")
	amount := fs.Int64("amount-micros", 0, "")
	currency := fs.String("currency", "USD", "")
	if _, err := c.parse(fs, args, 0, ""); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, req := range []string{"provider", "model", "size", "amount-micros"} {
		if !given[req] {
			return usagef("hubuctl prices set: --%s is required (see hubuctl prices set --help)", req)
		}
	}
	if *amount < 0 {
		return usagef("hubuctl prices set: --amount-micros must not be negative")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.SetPriceWithResponse(ctx, hubuapi.PriceUpdate{
		Provider: *provider, Model: *model, Size: *size, AmountMicros: *amount,
		Currency: strings.ToUpper(strings.TrimSpace(*currency)),
	})
	return show(c, resp, err, (*hubuapi.SetPriceResponse).GetJSON200, func(p *hubuapi.Price) error {
		fmt.Fprint(c.stdout, "Price set.\n\n")
		return writePrices(c.stdout, []hubuapi.Price{*p})
	})
}
