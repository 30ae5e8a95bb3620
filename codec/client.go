package codec

import "go.temporal.io/sdk/client"

// ClientOptions turns encryption on for a client and every worker built on
// it: opts.DataConverter becomes k.DataConverter(opts.DataConverter), and
// opts.FailureConverter the SDK's default failure converter over it with
// EncodeCommonAttributes, so failure messages and stack traces (a tool's
// error text) are encrypted too. External Storage stores payloads after
// they are encrypted, so blobs hold ciphertext as well.
func (k *Keyring) ClientOptions(opts *client.Options) {
	dc := k.DataConverter(opts.DataConverter)
	opts.DataConverter = dc
	opts.FailureConverter = FailureConverter(dc, true)
}
