package dedup

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// argText makes a distinct argument object of about size bytes.
func argText(i, size int) string {
	pad := size - 60
	if pad < 0 {
		pad = 0
	}
	return fmt.Sprintf(`{"order_id": "ord-%08d", "amount": 120.0, "note": "%s"}`, i, strings.Repeat("x", pad))
}

type naiveMap map[string]int

func naiveKey(tool, text string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		panic(err)
	}
	b, _ := json.Marshal(m)
	return tool + "\x00" + string(b)
}

// BenchmarkLookup measures one call's lookup (parse the argument text, then
// find a match) in logs of 10 to 100,000 records. Baselines in the same run:
// "naive" (a Go map keyed by json.Marshal of the decoded map[string]any,
// wrong on big integers but the speed reference) and "scan" (a linear scan
// with Equal).
func BenchmarkLookup(b *testing.B) {
	for _, size := range []int{100, 10 << 10} {
		for _, n := range []int{10, 1000, 100000} {
			texts := make([]string, n)
			l := NewLog()
			naive := naiveMap{}
			resp := l.BeginResponse()
			for i := range texts {
				texts[i] = argText(i, size)
				a, err := Parse(texts[i], Limits{})
				if err != nil {
					b.Fatal(err)
				}
				l.Append(Record{Tool: "issue_refund", Response: resp, Origin: Executed}, a)
				naive[naiveKey("issue_refund", texts[i])] = i
			}
			cur := l.BeginResponse()
			// A hit re-emits a middle record with another key order and 120.
			hit := strings.Replace(argText(n/2, size), `"amount": 120.0`, `"amount": 120`, 1)
			miss := argText(n+1, size)
			for _, q := range []struct {
				name, text string
				want       bool
			}{{"hit", hit, true}, {"miss", miss, false}} {
				name := fmt.Sprintf("%s/args=%dB/records=%d", q.name, size, n)
				b.Run(name+"/dedup", func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						a, _ := Parse(q.text, Limits{})
						rec, _ := l.FindMatchingExecution("issue_refund", a, cur)
						if (rec != nil) != q.want {
							b.Fatal("wrong answer")
						}
					}
				})
				b.Run(name+"/naive", func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						_, ok := naive[naiveKey("issue_refund", q.text)]
						if ok != q.want {
							b.Fatal("wrong answer")
						}
					}
				})
				if n > 1000 && size > 100 {
					continue // the scan at 100k x 10 KB is seconds per op; 1,000 shows its slope
				}
				b.Run(name+"/scan", func(b *testing.B) {
					for b.Loop() {
						a, _ := Parse(q.text, Limits{})
						found := false
						for i := 0; i < l.Len() && !found; i++ {
							found = l.At(i).Tool == "issue_refund" && Equal(l.At(i).Args().Value(), a.Value())
						}
						if found != q.want {
							b.Fatal("wrong answer")
						}
					}
				})
			}
		}
	}
}
