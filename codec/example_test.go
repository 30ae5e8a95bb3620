package codec_test

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/tulip-temporal/tulip/codec"
)

// A client (and every worker built on it) that encrypts every payload with
// the first key of a key file and reads any of its keys.
func ExampleKeyring_ClientOptions() {
	keys, err := codec.ParseKeys(strings.NewReader(
		"2026-12 "+strings.Repeat("A", 43)+"=\n"+ // the key that encrypts
			"2026-06 "+strings.Repeat("B", 43)+"=\n", // an older key, still read
	), "example")
	if err != nil {
		panic(err)
	}
	opts := client.Options{HostPort: "127.0.0.1:7233"}
	keys.ClientOptions(&opts)
	fmt.Println(keys.KeyIDs(), opts.DataConverter != nil, opts.FailureConverter != nil)
	// Output: [2026-12 2026-06] true true
}
