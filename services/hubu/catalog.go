package hubu

// Catalog is the price list, as it stands at one moment.
type Catalog []Price

// PriceOf is what scope costs: the entry for its exact size, else its model's "*" entry. A
// model the catalog does not list, or a size it has no price for, is the caller's error.
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
