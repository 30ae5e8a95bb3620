// Package claims reads Temporal External Storage references (claims) in
// payloads: which driver holds the payload, and under what key.
package claims

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	commonpb "go.temporal.io/api/common/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
)

// Claim is what a reference payload says: the driver's name and its
// claim data ("key" for tulip's blob store).
type Claim struct {
	Driver string
	Data   map[string]string
}

// Parse reads p as a reference, the way the SDK writes them (json/protobuf
// temporal.api.sdk.v1.ExternalStorageReference, and the older
// json/external-storage-reference). ok is false for any other payload.
func Parse(p *commonpb.Payload) (c Claim, ok bool) {
	md := p.GetMetadata()
	switch string(md[converter.MetadataEncoding]) {
	case "json/protobuf":
		ref := &sdkpb.ExternalStorageReference{}
		if string(md["messageType"]) != string(ref.ProtoReflect().Descriptor().FullName()) {
			return Claim{}, false
		}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(p.GetData(), ref); err != nil {
			return Claim{}, false
		}
		return Claim{Driver: ref.GetDriverName(), Data: ref.GetClaimData()}, true
	case "json/external-storage-reference":
		var legacy struct {
			DriverName  string `json:"driver_name"`
			DriverClaim struct {
				ClaimData map[string]string `json:"claim_data"`
			} `json:"driver_claim"`
		}
		if json.Unmarshal(p.GetData(), &legacy) != nil {
			return Claim{}, false
		}
		return Claim{Driver: legacy.DriverName, Data: legacy.DriverClaim.ClaimData}, true
	}
	return Claim{}, false
}

// BlobKey is the content address of a blob's bytes, under which tulip's
// blob stores keep it: "sha256-" and the hex of its SHA-256.
func BlobKey(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256-" + hex.EncodeToString(sum[:])
}
