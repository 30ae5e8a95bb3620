package codec

import (
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// Detect is a codec for clients that hold no keys: it writes payloads
// unchanged, and refuses to read an encrypted one with a *KeyError naming
// its key id (NoKeys set), instead of the SDK's "no converter for
// encoding" error. tulip's commands install it when no key file is given.
func Detect() converter.PayloadCodec { return detect{} }

type detect struct{}

func (detect) Encode(p []*commonpb.Payload) ([]*commonpb.Payload, error) { return p, nil }

func (detect) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	for _, p := range ps {
		if string(p.GetMetadata()[converter.MetadataEncoding]) == Encoding {
			return nil, &KeyError{KeyID: string(p.GetMetadata()[MetadataKeyID]), Unknown: true, NoKeys: true}
		}
	}
	return ps, nil
}

// DetectDataConverter wraps parent (nil: the SDK's default) with Detect,
// and, like Keyring.DataConverter, fails a workflow task rather than the
// run on a payload it cannot read.
func DetectDataConverter(parent converter.DataConverter) converter.DataConverter {
	if parent == nil {
		parent = converter.GetDefaultDataConverter()
	}
	return &dataConverter{DataConverter: converter.NewCodecDataConverter(parent, detect{})}
}
