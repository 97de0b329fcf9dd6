package httpserver

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

// The formats below repeat proto/hubu.openapi.yaml; TestSpecPatterns keeps them equal.
var (
	requestHashRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	providerRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	sizeRE        = regexp.MustCompile(`^(\*|[0-9]{2,4}x[0-9]{2,4}|[1-9][0-9]?:[1-9][0-9]?)$`)
	currencyRE    = regexp.MustCompile(`^[A-Z]{3}$`)
	agentNameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	accountRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
)

func invalid(format string, args ...any) error {
	return hubu.Errorf(hubu.CodeInvalidArguments, format, args...)
}

func validateHandle(h string) error {
	if !contract.IsPublicHandle(h) {
		return invalid("public_handle must look like hubu:public-operation:v1:<uuid>")
	}
	return nil
}

func authorizeRequestOf(b hubuapi.AuthorizeRequest) (hubu.AuthorizeRequest, error) {
	switch {
	case !contract.IsOperationKey(b.OperationKey):
		return hubu.AuthorizeRequest{}, invalid("operation_key must look like hubu:operation:v1:<platform>:<uuid>")
	case validateHandle(b.PublicHandle) != nil:
		return hubu.AuthorizeRequest{}, validateHandle(b.PublicHandle)
	case b.Tool != hubuapi.GenerateImage && b.Tool != hubuapi.EditImage:
		return hubu.AuthorizeRequest{}, invalid("tool must be generate_image or edit_image")
	case !requestHashRE.MatchString(b.RequestHash):
		return hubu.AuthorizeRequest{}, invalid("request_hash must be 64 lower-case hex digits")
	}
	// The shape only: what a model takes is checked for a new operation (Store.Authorize), so
	// that a recorded one is replayed whatever the models are today.
	if err := b.Arguments.CheckShape(); err != nil {
		return hubu.AuthorizeRequest{}, invalid("arguments: %s", err.Error())
	}
	return hubu.AuthorizeRequest{
		OperationKey: b.OperationKey, PublicHandle: b.PublicHandle, Tool: string(b.Tool), RequestHash: b.RequestHash, Arguments: b.Arguments,
	}, nil
}

// validReason checks an operator's or executor's free-text reason.
func validReason(reason *string) error {
	if reason != nil && (utf8.RuneCountInString(*reason) > 500 || strings.ContainsRune(*reason, 0)) {
		return invalid("reason must be at most 500 characters, without NUL")
	}
	return nil
}

func policyOf(p hubuapi.Policy) (hubu.Policy, error) {
	switch {
	case !currencyRE.MatchString(p.Currency):
		return hubu.Policy{}, invalid("policy.currency must be an ISO 4217 code such as USD")
	case p.PerOperationCeilingMicros < 0 || p.AutoApproveLimitMicros < 0 || p.BudgetMicros < 0:
		return hubu.Policy{}, invalid("policy amounts must not be negative")
	case p.BudgetPeriod != hubuapi.PolicyBudgetPeriodDay && p.BudgetPeriod != hubuapi.PolicyBudgetPeriodWeek && p.BudgetPeriod != hubuapi.PolicyBudgetPeriodMonth:
		return hubu.Policy{}, invalid("policy.budget_period must be day, week or month")
	case p.AutoApproveLimitMicros > p.PerOperationCeilingMicros:
		return hubu.Policy{}, invalid("policy.auto_approve_limit_micros must not be above per_operation_ceiling_micros")
	case p.AllowedProviders == nil || p.AllowedModels == nil:
		return hubu.Policy{}, invalid("policy.allowed_providers and allowed_models are required (use [\"*\"] for all)")
	}
	for _, m := range p.AllowedModels {
		if m != "*" && !contract.ValidModel(m) {
			return hubu.Policy{}, invalid("policy.allowed_models has an entry that is not a model name")
		}
	}
	for _, m := range p.AllowedProviders {
		if m != "*" && !providerRE.MatchString(m) {
			return hubu.Policy{}, invalid("policy.allowed_providers has an entry that is not a provider name")
		}
	}
	return hubu.Policy{
		Currency: p.Currency, PerOperationCeilingMicros: p.PerOperationCeilingMicros, AutoApproveLimitMicros: p.AutoApproveLimitMicros,
		BudgetMicros: p.BudgetMicros, BudgetPeriod: string(p.BudgetPeriod), AllowedProviders: p.AllowedProviders, AllowedModels: p.AllowedModels,
	}, nil
}

func priceUpdateOf(p hubuapi.PriceUpdate) (hubu.Price, error) {
	rule := hubu.PriceFlat
	if p.Rule != nil {
		rule = string(*p.Rule)
	}
	perMP := p.ExtraMpMicros != nil || p.InputMpMicros != nil
	switch {
	case !providerRE.MatchString(p.Provider):
		return hubu.Price{}, invalid("provider is not a provider name")
	case !contract.ValidModel(p.Model):
		return hubu.Price{}, invalid("model is not a model name")
	case !sizeRE.MatchString(p.Size):
		return hubu.Price{}, invalid("size must be <width>x<height>, <w>:<h> or *")
	case rule != hubu.PriceFlat && rule != hubu.PriceMegapixel:
		return hubu.Price{}, invalid("rule must be flat or megapixel")
	case p.AmountMicros < 0:
		return hubu.Price{}, invalid("amount_micros must not be negative")
	case !currencyRE.MatchString(p.Currency):
		return hubu.Price{}, invalid("currency must be an ISO 4217 code such as USD")
	case rule == hubu.PriceFlat && perMP:
		return hubu.Price{}, invalid("extra_mp_micros and input_mp_micros are a per-megapixel price's (rule megapixel)")
	case rule == hubu.PriceFlat:
		return hubu.Price{Provider: p.Provider, Model: p.Model, Size: p.Size, Rule: rule, AmountMicros: p.AmountMicros, Currency: p.Currency}, nil
	case p.ExtraMpMicros == nil || p.InputMpMicros == nil:
		return hubu.Price{}, invalid("a per-megapixel price needs extra_mp_micros and input_mp_micros")
	case *p.ExtraMpMicros < 0 || *p.InputMpMicros < 0:
		return hubu.Price{}, invalid("extra_mp_micros and input_mp_micros must not be negative")
	case p.Size != "*":
		return hubu.Price{}, invalid("a per-megapixel price covers every size: size must be *")
	}
	if m, known := contract.ModelNamed(p.Model); known && m.Sizing != contract.SizeInPixels {
		return hubu.Price{}, invalid("model %s is sized by aspect ratio, so it cannot be priced per megapixel", p.Model)
	}
	return hubu.Price{Provider: p.Provider, Model: p.Model, Size: p.Size, Rule: rule, AmountMicros: p.AmountMicros,
		ExtraMPMicros: *p.ExtraMpMicros, InputMPMicros: *p.InputMpMicros, Currency: p.Currency}, nil
}
