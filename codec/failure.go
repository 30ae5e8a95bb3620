package codec

import (
	"errors"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// failureConverterOver is the SDK's default failure converter over dc
// (with EncodeCommonAttributes when encode is set), reading an encoded
// failure it cannot decrypt as the *KeyError's text (Converters).
func failureConverterOver(dc converter.DataConverter, encode bool) converter.FailureConverter {
	return &failureConverter{
		FailureConverter: temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: encode}),
		dc:               dc,
	}
}

type failureConverter struct {
	converter.FailureConverter
	dc converter.DataConverter
}

func (f *failureConverter) FailureToError(fl *failurepb.Failure) error {
	if fl == nil {
		return f.FailureConverter.FailureToError(fl)
	}
	var out *failurepb.Failure
	for cur, depth := fl, 0; cur != nil; cur, depth = cur.GetCause(), depth+1 {
		ea := cur.GetEncodedAttributes()
		if ea == nil {
			continue
		}
		var v map[string]any
		var ke *KeyError
		if err := f.dc.FromPayload(ea, &v); !errors.As(err, &ke) {
			continue
		}
		if out == nil {
			out = proto.Clone(fl).(*failurepb.Failure)
		}
		target := out
		for range depth {
			target = target.GetCause()
		}
		target.Message = ke.Error()
		target.EncodedAttributes = nil
	}
	if out == nil {
		out = fl
	}
	return f.FailureConverter.FailureToError(out)
}
