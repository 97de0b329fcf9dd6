package tracing

// The OTLP protobuf encoding of spans, written with protowire from opentelemetry-proto's
// .proto files (trace/v1, common/v1, resource/v1 and collector/trace/v1), so that neither the
// generated types nor gRPC are linked (see exporter). Proto3 leaves a scalar field out at its
// zero value; the oneof of an AnyValue is always written, since its presence says the type.

import (
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The field numbers of opentelemetry-proto (v1) that appendRequest writes.
const (
	fieldRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fieldResourceSpansResource   = 1 // ResourceSpans.resource
	fieldResourceSpansScopeSpans = 2
	fieldResourceSpansSchemaURL  = 3
	fieldResourceAttributes      = 1 // Resource.attributes

	fieldScopeSpansScope     = 1 // ScopeSpans.scope
	fieldScopeSpansSpans     = 2
	fieldScopeSpansSchemaURL = 3
	fieldScopeName           = 1 // InstrumentationScope.name
	fieldScopeVersion        = 2
	fieldScopeAttributes     = 3

	fieldSpanTraceID              = 1 // Span.trace_id
	fieldSpanSpanID               = 2
	fieldSpanTraceState           = 3
	fieldSpanParentSpanID         = 4
	fieldSpanName                 = 5
	fieldSpanKind                 = 6
	fieldSpanStart                = 7
	fieldSpanEnd                  = 8
	fieldSpanAttributes           = 9
	fieldSpanDroppedAttrs         = 10
	fieldSpanEvents               = 11
	fieldSpanDroppedEvents        = 12
	fieldSpanLinks                = 13
	fieldSpanDroppedLinks         = 14
	fieldSpanStatus               = 15
	fieldSpanFlags                = 16
	fieldEventTime                = 1 // Span.Event.time_unix_nano
	fieldEventName                = 2
	fieldEventAttributes          = 3
	fieldEventDroppedAttrs        = 4
	fieldLinkTraceID              = 1 // Span.Link.trace_id
	fieldLinkSpanID               = 2
	fieldLinkTraceState           = 3
	fieldLinkAttributes           = 4
	fieldLinkDroppedAttrs         = 5
	fieldLinkFlags                = 6
	fieldStatusMessage            = 2 // Status.message
	fieldStatusCode               = 3
	fieldKeyValueKey              = 1 // KeyValue.key
	fieldKeyValueValue            = 2
	fieldAnyString                = 1 // AnyValue's oneof value
	fieldAnyBool                  = 2
	fieldAnyInt                   = 3
	fieldAnyDouble                = 4
	fieldAnyArray                 = 5
	fieldAnyKVList                = 6
	fieldAnyBytes                 = 7
	fieldArrayValues              = 1 // ArrayValue.values
	fieldKVListValues             = 1 // KeyValueList.values
	spanFlagsHasIsRemote          = 0x100
	spanFlagsIsRemote             = 0x200
	statusCodeOK, statusCodeError = 1, 2
)

// appendRequest appends the ExportTraceServiceRequest of spans: one ResourceSpans per
// resource, one ScopeSpans in it per instrumentation scope, each in the order first seen.
func appendRequest(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	type group struct {
		first sdktrace.ReadOnlySpan
		spans []sdktrace.ReadOnlySpan
	}
	var resources []*group // by resource
	var scopes [][]*group  // by resource, then scope
	for _, s := range spans {
		if s == nil {
			continue
		}
		r := 0
		for r < len(resources) && resources[r].first.Resource().Equivalent() != s.Resource().Equivalent() {
			r++
		}
		if r == len(resources) {
			resources, scopes = append(resources, &group{first: s}), append(scopes, nil)
		}
		i := 0
		for i < len(scopes[r]) && scopes[r][i].first.InstrumentationScope() != s.InstrumentationScope() {
			i++
		}
		if i == len(scopes[r]) {
			scopes[r] = append(scopes[r], &group{first: s})
		}
		scopes[r][i].spans = append(scopes[r][i].spans, s)
	}
	for r, res := range resources {
		b = appendMessage(b, fieldRequestResourceSpans, func(b []byte) []byte {
			if attrs := res.first.Resource(); attrs != nil {
				b = appendMessage(b, fieldResourceSpansResource, func(b []byte) []byte {
					return appendKeyValues(b, fieldResourceAttributes, attrs.Attributes())
				})
			}
			for _, sc := range scopes[r] {
				b = appendMessage(b, fieldResourceSpansScopeSpans, func(b []byte) []byte {
					scope := sc.first.InstrumentationScope()
					if scope.Name != "" || scope.Version != "" || scope.SchemaURL != "" || scope.Attributes.Len() > 0 {
						b = appendMessage(b, fieldScopeSpansScope, func(b []byte) []byte {
							b = appendString(b, fieldScopeName, scope.Name)
							b = appendString(b, fieldScopeVersion, scope.Version)
							return appendKeyValues(b, fieldScopeAttributes, scope.Attributes.ToSlice())
						})
					}
					for _, s := range sc.spans {
						b = appendMessage(b, fieldScopeSpansSpans, func(b []byte) []byte { return appendSpan(b, s) })
					}
					return appendString(b, fieldScopeSpansSchemaURL, scope.SchemaURL)
				})
			}
			if res := res.first.Resource(); res != nil {
				b = appendString(b, fieldResourceSpansSchemaURL, res.SchemaURL())
			}
			return b
		})
	}
	return b
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendString(b, fieldSpanTraceID, tid[:])
	b = appendString(b, fieldSpanSpanID, sid[:])
	b = appendString(b, fieldSpanTraceState, sc.TraceState().String())
	if psid := s.Parent().SpanID(); psid.IsValid() {
		b = appendString(b, fieldSpanParentSpanID, psid[:])
	}
	b = appendString(b, fieldSpanName, s.Name())
	if k := s.SpanKind(); k >= trace.SpanKindInternal && k <= trace.SpanKindConsumer {
		b = appendVarint(b, fieldSpanKind, uint64(k)) // the same numbers in the API and the protocol
	}
	b = appendFixed64(b, fieldSpanStart, unixNano(s.StartTime()))
	b = appendFixed64(b, fieldSpanEnd, unixNano(s.EndTime()))
	b = appendKeyValues(b, fieldSpanAttributes, s.Attributes())
	b = appendVarint(b, fieldSpanDroppedAttrs, clampUint32(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		b = appendMessage(b, fieldSpanEvents, func(b []byte) []byte {
			b = appendFixed64(b, fieldEventTime, unixNano(ev.Time))
			b = appendString(b, fieldEventName, ev.Name)
			b = appendKeyValues(b, fieldEventAttributes, ev.Attributes)
			return appendVarint(b, fieldEventDroppedAttrs, clampUint32(ev.DroppedAttributeCount))
		})
	}
	b = appendVarint(b, fieldSpanDroppedEvents, clampUint32(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = appendMessage(b, fieldSpanLinks, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendString(b, fieldLinkTraceID, ltid[:])
			b = appendString(b, fieldLinkSpanID, lsid[:])
			b = appendString(b, fieldLinkTraceState, l.SpanContext.TraceState().String())
			b = appendKeyValues(b, fieldLinkAttributes, l.Attributes)
			b = appendVarint(b, fieldLinkDroppedAttrs, clampUint32(l.DroppedAttributeCount))
			return appendFixed32(b, fieldLinkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendVarint(b, fieldSpanDroppedLinks, clampUint32(s.DroppedLinks()))
	status := s.Status()
	b = appendMessage(b, fieldSpanStatus, func(b []byte) []byte { // present even when unset, as OpenTelemetry's
		b = appendString(b, fieldStatusMessage, status.Description)
		switch status.Code {
		case codes.Ok:
			b = appendVarint(b, fieldStatusCode, statusCodeOK)
		case codes.Error:
			b = appendVarint(b, fieldStatusCode, statusCodeError)
		}
		return b
	})
	return appendFixed32(b, fieldSpanFlags, spanFlags(sc.TraceFlags(), s.Parent()))
}

// spanFlags are the W3C trace flags in the low byte, and whether parent is remote (which is
// always known here).
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | spanFlagsHasIsRemote
	if parent.IsRemote() {
		f |= spanFlagsIsRemote
	}
	return f
}

func appendKeyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendMessage(b, num, func(b []byte) []byte {
			b = appendString(b, fieldKeyValueKey, string(kv.Key))
			return appendMessage(b, fieldKeyValueValue, func(b []byte) []byte { return appendValue(b, kv.Value) })
		})
	}
	return b
}

// appendValue appends the AnyValue fields of v (none for an empty value).
func appendValue(b []byte, v attribute.Value) []byte {
	array := func(n int, each func(b []byte, i int) []byte) []byte {
		return appendMessage(b, fieldAnyArray, func(b []byte) []byte {
			for i := range n {
				b = appendMessage(b, fieldArrayValues, func(b []byte) []byte { return each(b, i) })
			}
			return b
		})
	}
	switch v.Type() {
	case attribute.BOOL:
		return protowire.AppendVarint(protowire.AppendTag(b, fieldAnyBool, protowire.VarintType), protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		return protowire.AppendVarint(protowire.AppendTag(b, fieldAnyInt, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.AppendFixed64(protowire.AppendTag(b, fieldAnyDouble, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return protowire.AppendString(protowire.AppendTag(b, fieldAnyString, protowire.BytesType), v.AsString())
	case attribute.BYTESLICE:
		return protowire.AppendBytes(protowire.AppendTag(b, fieldAnyBytes, protowire.BytesType), v.AsByteSlice())
	case attribute.BOOLSLICE:
		vs := v.AsBoolSlice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, attribute.BoolValue(vs[i])) })
	case attribute.INT64SLICE:
		vs := v.AsInt64Slice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, attribute.Int64Value(vs[i])) })
	case attribute.FLOAT64SLICE:
		vs := v.AsFloat64Slice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, attribute.Float64Value(vs[i])) })
	case attribute.STRINGSLICE:
		vs := v.AsStringSlice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, attribute.StringValue(vs[i])) })
	case attribute.SLICE:
		vs := v.AsSlice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, vs[i]) })
	case attribute.MAP:
		return appendMessage(b, fieldAnyKVList, func(b []byte) []byte { return appendKeyValues(b, fieldKVListValues, v.AsMap()) })
	case attribute.EMPTY:
		return b
	default:
		return protowire.AppendString(protowire.AppendTag(b, fieldAnyString, protowire.BytesType), "INVALID")
	}
}

// appendMessage appends field num holding the message body writes.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), body(nil))
}

// The scalar fields below are left out at their zero value, as proto3 does.

// appendString appends a string or bytes field.
func appendString[T string | []byte](b []byte, num protowire.Number, v T) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), uint64(len(v)))
	return append(b, v...)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
}

func unixNano(t time.Time) uint64 { return uint64(max(0, t.UnixNano())) }

func clampUint32(v int) uint64 { return uint64(min(max(v, 0), math.MaxUint32)) }
