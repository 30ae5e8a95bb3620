// Package codec encrypts Temporal payloads with AES-256-GCM, so that the
// server (its database, its visibility store, any external blob store) holds
// only ciphertext of prompts, tool arguments and tool results.
//
// A Keyring holds one or more 32-byte keys, each with an id. The first key
// encrypts; every key decrypts, chosen by the key id written in each
// payload's metadata, so a key can be rotated (put the new one first, keep
// the old ones) while old histories stay readable. Payloads that were never
// encrypted pass through Decode unchanged.
//
// The Keyring is a plain converter.PayloadCodec: give it to
// converter.NewCodecDataConverter yourself, or let ClientOptions set the
// client's data converter and failure converter (failure messages and stack
// traces encrypted too). Handler serves the Temporal codec-server protocol
// (POST /encode, POST /decode) for the Web UI and the Temporal CLI.
//
// A key file holds one key per line, "KEY_ID BASE64_OF_32_BYTES"; blank
// lines and lines starting with # are ignored. `tulip keygen KEY_ID -o FILE`
// appends a line with a fresh random key to a file of mode 0600.
package codec
