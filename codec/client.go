package codec

import (
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// ClientOptions turns encryption on for a client and every worker built on
// it: opts.DataConverter becomes k.DataConverter(opts.DataConverter), and
// opts.FailureConverter the SDK's default failure converter over it with
// EncodeCommonAttributes, so failure messages and stack traces (a tool's
// error text) are encrypted too. External Storage stores payloads after
// they are encrypted, so blobs hold ciphertext as well.
func (k *Keyring) ClientOptions(opts *client.Options) {
	opts.DataConverter, opts.FailureConverter = k.Converters(opts.DataConverter)
}

// Converters are what ClientOptions sets, for options that are not
// client.Options (a replayer's, say): k.DataConverter(parent), and
// the SDK's default failure converter over it with EncodeCommonAttributes
// (none for a nil Keyring), except that a failure whose encoded attributes
// cannot be decrypted reads as the *KeyError's text, naming the key id,
// instead of the SDK's placeholder "Encoded failure".
func (k *Keyring) Converters(parent converter.DataConverter) (converter.DataConverter, converter.FailureConverter) {
	dc := k.DataConverter(parent)
	return dc, failureConverterOver(dc, k != nil)
}
