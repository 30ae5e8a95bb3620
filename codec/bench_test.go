package codec_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/tulip-temporal/tulip/codec"
)

// BenchmarkCodecRatio: a payload's round trip (ToPayload + FromPayload)
// through the encrypting data converter vs the SDK's default, interleaved
// in blocks in the same run; reports codec/plain time and bytes ratios.
//
//	go test ./codec -run '^$' -bench CodecRatio -benchtime 20x
func BenchmarkCodecRatio(b *testing.B) {
	k, err := codec.NewKeyring(codec.Key{ID: "bench", Secret: bytes.Repeat([]byte{3}, codec.KeySize)})
	if err != nil {
		b.Fatal(err)
	}
	plain, enc := converter.GetDefaultDataConverter(), k.DataConverter(nil)
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		value := map[string]any{"order_id": "ord-4821", "note": strings.Repeat("x", size)}
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			const block = 20
			roundTrip := func(dc converter.DataConverter) (time.Duration, int) {
				start := time.Now()
				n := 0
				for range block {
					p, err := dc.ToPayload(value)
					if err != nil {
						b.Fatal(err)
					}
					var back map[string]any
					if err := dc.FromPayload(p, &back); err != nil {
						b.Fatal(err)
					}
					n = len(p.Data)
				}
				return time.Since(start), n
			}
			var tp, te time.Duration
			var bp, be int
			for range b.N {
				d, n := roundTrip(plain)
				tp, bp = tp+d, n
				d, n = roundTrip(enc)
				te, be = te+d, n
			}
			b.ReportMetric(float64(te)/float64(tp), "codec/plain")
			b.ReportMetric(float64(be)/float64(bp), "bytes-codec/plain")
		})
	}
}
