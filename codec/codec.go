package codec

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata written on every encrypted payload.
const (
	// Encoding is the payload's "encoding" metadata value.
	Encoding = "binary/encrypted"
	// MetadataKeyID names the key that encrypted the payload.
	MetadataKeyID = "encryption-key-id"
	// MetadataCipher names the cipher: Cipher, or CipherLegacy for
	// payloads written before it.
	MetadataCipher = "encryption-cipher"
	// Cipher is AES-256-GCM under a key derived from the secret
	// (HKDF-SHA-256 with a label), with a synthetic 96-bit nonce from an
	// HMAC under a second derived key (see Encode).
	Cipher = "AES256-GCM-HKDF"
	// CipherLegacy is AES-256-GCM keyed by the secret itself, as payloads
	// were written before Cipher; they are still read.
	CipherLegacy = "AES256-GCM"
)

var _ converter.PayloadCodec = (*Keyring)(nil)

// Encode encrypts each payload whole (its data and its metadata, so even
// the original encoding is hidden) with the first key. The key id is the
// GCM additional data: a payload cannot be relabelled with another id.
// Data is nonce || ciphertext || tag.
//
// The nonce is synthetic (as in SIV modes): an HMAC-SHA-256 of the
// plaintext under its own key (derived from the secret under another label
// than the AES key), so a nonce repeats only for the same plaintext, and
// then so does the ciphertext. That keeps content-addressed blob stores
// deduplicating. What it reveals: which payloads are equal (the same
// plaintext encrypts to the same bytes under the same key), and each
// payload's length (about 52 bytes more than its plaintext's). Nothing of
// a payload's content. The codec server's /encode would let its caller test
// guesses (encrypt a guess, compare it with stored bytes), so it is off
// unless asked for (HandlerOptions.AllowEncode).
//
// A nil Keyring holds no keys: it writes payloads unchanged.
func (k *Keyring) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if k == nil {
		return payloads, nil
	}
	id := k.ids[0]
	aead := k.aead[id]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: encode payload: %w", err)
		}
		mac := hmac.New(sha256.New, k.nonceKey)
		mac.Write(plain)
		nonce := mac.Sum(make([]byte, 0, sha256.Size+len(plain)+aead.Overhead()))[:aead.NonceSize()]
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				MetadataKeyID:              []byte(id),
				MetadataCipher:             []byte(Cipher),
			},
			Data: aead.Seal(nonce, nonce, plain, []byte(id)),
		}
	}
	return out, nil
}

// Decode decrypts payloads this codec encrypted, with the key their
// metadata names; others pass through unchanged. A payload it cannot open
// gives a *KeyError naming the key id, never a garbled value. A nil
// Keyring refuses every encrypted payload with a *KeyError naming its key
// (NoKeys set), instead of the SDK's "no converter for encoding" error.
func (k *Keyring) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if k == nil {
		for _, p := range payloads {
			if string(p.GetMetadata()[converter.MetadataEncoding]) == Encoding {
				return nil, &KeyError{KeyID: string(p.GetMetadata()[MetadataKeyID]), Unknown: true, NoKeys: true}
			}
		}
		return payloads, nil
	}
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		ciphers := k.aead
		switch c := string(p.GetMetadata()[MetadataCipher]); c {
		case Cipher:
		case CipherLegacy:
			ciphers = k.legacy
		default:
			return nil, fmt.Errorf("codec: payload encrypted with key %q uses cipher %q; this codec knows %s and %s", id, c, Cipher, CipherLegacy)
		}
		aead, ok := ciphers[id]
		if !ok {
			return nil, &KeyError{KeyID: id, Unknown: true}
		}
		data := p.GetData()
		if len(data) < aead.NonceSize()+aead.Overhead() {
			return nil, &KeyError{KeyID: id}
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, &KeyError{KeyID: id}
		}
		var inner commonpb.Payload
		if err := proto.Unmarshal(plain, &inner); err != nil {
			return nil, fmt.Errorf("codec: payload decrypted with key %q is not a payload: %w", id, err)
		}
		out[i] = &inner
	}
	return out, nil
}

// DataConverter wraps parent (nil: the SDK's default) so that every
// payload it writes is encrypted and every encrypted payload it reads is
// decrypted. In workflow code a payload it cannot decrypt fails the
// workflow task, not the run: Temporal retries the task, and the run goes
// on once a worker with the key takes it. A nil Keyring's converter (for
// a client that holds no keys) writes plain payloads and names the key of
// an encrypted one it reads.
func (k *Keyring) DataConverter(parent converter.DataConverter) converter.DataConverter {
	if parent == nil {
		parent = converter.GetDefaultDataConverter()
	}
	return &dataConverter{DataConverter: converter.NewCodecDataConverter(parent, k)}
}

// dataConverter is the codec data converter, aware of where it decodes:
// in workflow code, a payload it cannot decrypt panics with its *KeyError
// so that the SDK fails the workflow task (retried until a worker with the
// key takes it) instead of failing the run; elsewhere it returns the error.
type dataConverter struct {
	converter.DataConverter
	inWorkflow bool
}

var (
	_ converter.ContextAware                          = (*dataConverter)(nil)
	_ converter.DataConverterWithSerializationContext = (*dataConverter)(nil)
)

func (d *dataConverter) FromPayload(p *commonpb.Payload, v any) error {
	return d.check(d.DataConverter.FromPayload(p, v))
}

func (d *dataConverter) FromPayloads(p *commonpb.Payloads, v ...any) error {
	return d.check(d.DataConverter.FromPayloads(p, v...))
}

func (d *dataConverter) check(err error) error {
	var ke *KeyError
	if d.inWorkflow && errors.As(err, &ke) {
		panic(ke)
	}
	return err
}

// WithWorkflowContext implements converter.ContextAware.
func (d *dataConverter) WithWorkflowContext(ctx converter.WorkflowContext) converter.DataConverter {
	inner := d.DataConverter
	if ca, ok := inner.(converter.ContextAware); ok {
		inner = ca.WithWorkflowContext(ctx)
	}
	return &dataConverter{DataConverter: inner, inWorkflow: true}
}

// WithContext implements converter.ContextAware.
func (d *dataConverter) WithContext(ctx context.Context) converter.DataConverter {
	inner := d.DataConverter
	if ca, ok := inner.(converter.ContextAware); ok {
		inner = ca.WithContext(ctx)
	}
	return &dataConverter{DataConverter: inner, inWorkflow: d.inWorkflow}
}

// WithSerializationContext implements
// converter.DataConverterWithSerializationContext.
func (d *dataConverter) WithSerializationContext(sc converter.SerializationContext) converter.DataConverter {
	inner := d.DataConverter
	if s, ok := inner.(converter.DataConverterWithSerializationContext); ok {
		inner = s.WithSerializationContext(sc)
	}
	return &dataConverter{DataConverter: inner, inWorkflow: d.inWorkflow}
}
