package codec_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tulip-temporal/tulip/codec"
)

func key(id string, b byte) codec.Key {
	return codec.Key{ID: id, Secret: bytes.Repeat([]byte{b}, codec.KeySize)}
}

func ring(t *testing.T, keys ...codec.Key) *codec.Keyring {
	t.Helper()
	k, err := codec.NewKeyring(keys...)
	require.NoError(t, err)
	return k
}

const secret = `{"order":"A-1001","amount_cents":4999,"address":"12 Rue Tulipe"}`

func TestRoundTripHidesEverything(t *testing.T) {
	k := ring(t, key("k1", 1))
	dc := k.DataConverter(nil)
	p, err := dc.ToPayload(map[string]any{"order": "A-1001", "address": "12 Rue Tulipe"})
	require.NoError(t, err)
	assert.Equal(t, codec.Encoding, string(p.Metadata[converter.MetadataEncoding]))
	assert.Equal(t, "k1", string(p.Metadata[codec.MetadataKeyID]))
	raw, err := proto.Marshal(p) // the bytes a server stores
	require.NoError(t, err)
	for _, plain := range []string{"A-1001", "Rue Tulipe", "json/plain", "order"} {
		assert.NotContains(t, string(raw), plain, "ciphertext holds %q", plain)
	}
	var got map[string]any
	require.NoError(t, dc.FromPayload(p, &got))
	assert.Equal(t, "12 Rue Tulipe", got["address"])

	// One value encrypts to the same bytes (a synthetic nonce: blob stores
	// deduplicate); another value gets another nonce.
	p2, _ := dc.ToPayload(map[string]any{"order": "A-1001", "address": "12 Rue Tulipe"})
	assert.Equal(t, p.Data, p2.Data)
	p3, _ := dc.ToPayload(map[string]any{"order": "A-1002", "address": "12 Rue Tulipe"})
	assert.NotEqual(t, p.Data[:12], p3.Data[:12], "nonces differ")
	// Another key, even under the same id, gives other bytes.
	p4, _ := ring(t, key("k1", 2)).DataConverter(nil).ToPayload(map[string]any{"order": "A-1001", "address": "12 Rue Tulipe"})
	assert.NotEqual(t, p.Data, p4.Data)
}

func TestDecodeErrors(t *testing.T) {
	old := ring(t, key("2026-01", 1))
	enc, err := old.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(secret)}})
	require.NoError(t, err)
	p := enc[0]

	tampered := clone(p)
	tampered.Data[len(tampered.Data)-1] ^= 1
	relabelled := clone(p)
	relabelled.Metadata[codec.MetadataKeyID] = []byte("2026-02")
	short := clone(p)
	short.Data = short.Data[:5]

	cases := []struct {
		name    string
		ring    *codec.Keyring
		payload *commonpb.Payload
		unknown bool
		keyID   string
	}{
		{"key id not held", ring(t, key("2026-02", 2)), p, true, "2026-01"},
		{"other key under the same id", ring(t, key("2026-01", 9)), p, false, "2026-01"},
		{"ciphertext altered", old, tampered, false, "2026-01"},
		{"key id relabelled", ring(t, key("2026-02", 1)), relabelled, false, "2026-02"},
		{"too short", old, short, false, "2026-01"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.ring.Decode([]*commonpb.Payload{c.payload})
			var ke *codec.KeyError
			require.True(t, errors.As(err, &ke), "got %v", err)
			assert.Equal(t, c.keyID, ke.KeyID)
			assert.Equal(t, c.unknown, ke.Unknown)
			assert.Equal(t, "tulip.CodecKey", ke.Type())
			assert.Contains(t, err.Error(), `"`+c.keyID+`"`)
			assert.NotContains(t, err.Error(), "\n")

			// Through a data converter too: an error, never garbage.
			var v any
			err = c.ring.DataConverter(nil).FromPayload(c.payload, &v)
			require.True(t, errors.As(err, &ke), "got %v", err)
			assert.Nil(t, v)
		})
	}
}

func clone(p *commonpb.Payload) *commonpb.Payload {
	c := &commonpb.Payload{Metadata: map[string][]byte{}, Data: bytes.Clone(p.Data)}
	for k, v := range p.Metadata {
		c.Metadata[k] = bytes.Clone(v)
	}
	return c
}

// Rotation: the new key goes first and encrypts; the old one stays and
// still decrypts what it wrote. Payloads never encrypted pass through.
func TestRotation(t *testing.T) {
	before := ring(t, key("old", 1)).DataConverter(nil)
	after := ring(t, key("new", 2), key("old", 1)).DataConverter(nil)
	plainDC := converter.GetDefaultDataConverter()

	oldP, _ := before.ToPayload("written with the old key")
	newP, _ := after.ToPayload("written with the new key")
	plainP, _ := plainDC.ToPayload("written before encryption")
	assert.Equal(t, "new", string(newP.Metadata[codec.MetadataKeyID]))

	for _, p := range []*commonpb.Payload{oldP, newP, plainP} {
		var s string
		require.NoError(t, after.FromPayload(p, &s))
		assert.Contains(t, s, "written")
	}
	var s string
	var ke *codec.KeyError
	require.True(t, errors.As(before.FromPayload(newP, &s), &ke))
	assert.Equal(t, "new", ke.KeyID)
}

func TestKeyFile(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	cases := []struct {
		name, text string
		ids        []string
		errLine    int
		errHas     string
	}{
		{"one key", "k1 " + good + "\n", []string{"k1"}, 0, ""},
		{"comments, blanks, two keys", "# rotated 2026-12\n\nnew " + good + "\n  old " + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{8}, 32)) + "\n", []string{"new", "old"}, 0, ""},
		{"empty", "# nothing\n", nil, 0, "no keys"},
		{"three fields", "k1 " + good + " extra\n", nil, 1, "found 3 fields"},
		{"not base64", "k1 !!!\n", nil, 1, "not base64"},
		{"short key", "# c\nk1 " + base64.StdEncoding.EncodeToString([]byte("short")) + "\n", nil, 2, "5 bytes; AES-256 needs 32"},
		{"duplicate id", "k1 " + good + "\nk1 " + good + "\n", nil, 2, "appears twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, err := codec.ParseKeys(strings.NewReader(c.text), "keys.txt")
			if c.errHas == "" {
				require.NoError(t, err)
				assert.Equal(t, c.ids, k.KeyIDs())
				return
			}
			var kfe *codec.KeyFileError
			require.True(t, errors.As(err, &kfe), "got %v", err)
			assert.Equal(t, c.errLine, kfe.Line)
			assert.Contains(t, err.Error(), "keys.txt")
			assert.Contains(t, err.Error(), c.errHas)
		})
	}

	_, err := codec.LoadKeyFile(filepath.Join(t.TempDir(), "missing"))
	var kfe *codec.KeyFileError
	require.True(t, errors.As(err, &kfe))
	assert.Contains(t, err.Error(), "no such file")

}

// The codec-server protocol over real HTTP, with the Web UI's CORS
// preflight.
func TestHandler(t *testing.T) {
	k := ring(t, key("k1", 1))
	srv := httptest.NewServer(k.Handler(codec.HandlerOptions{AllowOrigins: []string{"http://127.0.0.1:8233"}}))
	defer srv.Close()
	enc, err := k.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(secret)}})
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	require.NoError(t, err)

	post := func(path, origin string, body []byte) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	// Preflight from the UI's origin.
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	req.Header.Set("Origin", "http://127.0.0.1:8233")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "http://127.0.0.1:8233", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "X-Namespace")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Private-Network"), "only when asked")
	req.Header.Set("Access-Control-Request-Private-Network", "true")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Private-Network"))

	resp, out := post("/decode", "http://127.0.0.1:8233", body)
	assert.Equal(t, http.StatusOK, resp.StatusCode, out)
	assert.Equal(t, "http://127.0.0.1:8233", resp.Header.Get("Access-Control-Allow-Origin"))
	var got commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(out), &got))
	assert.Equal(t, secret, string(got.Payloads[0].Data))

	resp, out = post("/decode", "http://evil.example", body)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, out)

	// /encode is off unless asked for: with a deterministic codec it lets
	// a caller test guesses against stored ciphertext.
	plainBody, _ := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("x")}}})
	resp, out = post("/encode", "", plainBody)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, out)
	assert.Contains(t, out, "--allow-encode")
	withEncode := httptest.NewServer(k.Handler(codec.HandlerOptions{AllowEncode: true}))
	defer withEncode.Close()
	resp3, err := http.Post(withEncode.URL+"/encode", "application/json", bytes.NewReader(plainBody))
	require.NoError(t, err)
	b3, _ := io.ReadAll(resp3.Body)
	resp3.Body.Close()
	require.Equal(t, http.StatusOK, resp3.StatusCode, string(b3))
	assert.Contains(t, string(b3), base64.StdEncoding.EncodeToString([]byte(codec.Encoding)))

	// A payload under an unknown key: 400 naming the key id.
	other := ring(t, key("k2", 2))
	srv2 := httptest.NewServer(other.Handler(codec.HandlerOptions{}))
	defer srv2.Close()
	resp2, err := http.Post(srv2.URL+"/decode", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp2.StatusCode)
	assert.Contains(t, string(b), `key "k1"`)
}

// Without keys (a nil Keyring), an encrypted payload is refused naming its
// key id; plain payloads pass, and are written plain.
func TestNoKeys(t *testing.T) {
	enc, err := ring(t, key("k9", 1)).DataConverter(nil).ToPayload("secret")
	require.NoError(t, err)
	var none *codec.Keyring
	dc := none.DataConverter(nil)
	var s string
	var ke *codec.KeyError
	err = dc.FromPayload(enc, &s)
	require.True(t, errors.As(err, &ke), "got %v", err)
	assert.True(t, ke.NoKeys)
	assert.Equal(t, "k9", ke.KeyID)
	assert.Contains(t, err.Error(), "--codec-key-file")
	plain, _ := dc.ToPayload("plain")
	assert.Equal(t, "json/plain", string(plain.Metadata["encoding"]))
	require.NoError(t, dc.FromPayload(plain, &s))
	assert.Equal(t, "plain", s)
}

// A failure's message is encrypted; read without its key, it names the key
// id instead of the SDK's "Encoded failure".
func TestFailureMessages(t *testing.T) {
	k1, k2 := ring(t, key("k1", 1)), ring(t, key("k2", 2))
	_, fc1 := k1.Converters(nil)
	f := fc1.ErrorToFailure(temporal.NewApplicationError("refund of ord-4821 declined", "billing.Declined"))
	assert.NotContains(t, f.GetMessage(), "ord-4821")
	assert.Contains(t, fc1.FailureToError(f).Error(), "refund of ord-4821 declined")

	_, fc2 := k2.Converters(nil)
	_, fcNone := (*codec.Keyring)(nil).Converters(nil)
	for _, fc := range []converter.FailureConverter{fc2, fcNone} {
		err := fc.FailureToError(f)
		assert.Contains(t, err.Error(), `key "k1"`)
		assert.NotContains(t, err.Error(), "Encoded failure")
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr))
		assert.Equal(t, "billing.Declined", appErr.Type(), "the type stays readable")
	}
}

// Each secret gives two keys, under two labels (HKDF-SHA-256): one for
// AES-256-GCM, one for the nonce's HMAC; the secret itself keys neither.
// Payloads written before (the secret as the AES key) stay readable.
func TestDerivedKeysAndLegacyPayloads(t *testing.T) {
	k := ring(t, key("k1", 1))
	enc, err := k.Encode([]*commonpb.Payload{{Data: []byte(secret)}})
	require.NoError(t, err)
	assert.Equal(t, codec.Cipher, string(enc[0].Metadata[codec.MetadataCipher]))
	raw := bytes.Repeat([]byte{1}, codec.KeySize)
	block, err := aes.NewCipher(raw)
	require.NoError(t, err)
	gcm, err := cipher.NewGCM(block)
	require.NoError(t, err)
	data := enc[0].Data
	_, err = gcm.Open(nil, data[:gcm.NonceSize()], data[gcm.NonceSize():], []byte("k1"))
	assert.Error(t, err, "the secret itself does not open a new payload")

	// A payload as written before derived keys: AES-256-GCM under the
	// secret, labelled with the legacy cipher.
	plain, err := proto.Marshal(&commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"old"`)})
	require.NoError(t, err)
	nonce := bytes.Repeat([]byte{7}, gcm.NonceSize())
	old := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(codec.Encoding),
		codec.MetadataKeyID: []byte("k1"), codec.MetadataCipher: []byte(codec.CipherLegacy)},
		Data: gcm.Seal(nonce, nonce, plain, []byte("k1"))}
	dec, err := k.Decode([]*commonpb.Payload{old})
	require.NoError(t, err)
	assert.Equal(t, `"old"`, string(dec[0].Data))

	old.Metadata[codec.MetadataCipher] = []byte("ROT13")
	_, err = k.Decode([]*commonpb.Payload{old})
	assert.ErrorContains(t, err, `uses cipher "ROT13"`)
}
