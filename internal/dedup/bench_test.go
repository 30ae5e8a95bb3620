package dedup

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
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

// BenchmarkLookupRatio computes the README's ratios itself: lookups in a
// 100,000-record log against a 10-record log, and against the naive map at
// 100,000, for hits and misses at 100 B and 10 KB. The arms run
// interleaved, in blocks, after a warm-up, so that none absorbs the
// warm-up or a slow phase of the machine alone:
//
//	go test ./dedup -run '^$' -bench LookupRatio -benchtime 20x
func BenchmarkLookupRatio(b *testing.B) {
	type arm struct {
		l     *Log
		naive naiveMap
		cur   int
	}
	build := func(n, size int) arm {
		a := arm{l: NewLog(), naive: naiveMap{}}
		resp := a.l.BeginResponse()
		for i := range n {
			t := argText(i, size)
			args, err := Parse(t, Limits{})
			if err != nil {
				b.Fatal(err)
			}
			a.l.Append(Record{Tool: "issue_refund", Response: resp, Origin: Executed}, args)
			a.naive[naiveKey("issue_refund", t)] = i
		}
		a.cur = a.l.BeginResponse()
		return a
	}
	const block = 200
	for _, size := range []int{100, 10 << 10} {
		small, big := build(10, size), build(100000, size)
		queries := map[string][2]string{ // small, big
			"hit": {strings.Replace(argText(5, size), `"amount": 120.0`, `"amount": 120`, 1),
				strings.Replace(argText(50000, size), `"amount": 120.0`, `"amount": 120`, 1)},
			"miss": {argText(100001, size), argText(100001, size)},
		}
		for _, kind := range []string{"hit", "miss"} {
			q := queries[kind]
			want := kind == "hit"
			lookup := func(a arm, text string) time.Duration {
				start := time.Now()
				for range block {
					args, _ := Parse(text, Limits{})
					if rec, _ := a.l.FindMatchingExecution("issue_refund", args, a.cur); (rec != nil) != want {
						b.Fatal("wrong answer")
					}
				}
				return time.Since(start)
			}
			naive := func(a arm, text string) time.Duration {
				start := time.Now()
				for range block {
					if _, ok := a.naive[naiveKey("issue_refund", text)]; ok != want {
						b.Fatal("wrong answer")
					}
				}
				return time.Since(start)
			}
			b.Run(fmt.Sprintf("%s/args=%dB", kind, size), func(b *testing.B) {
				for range 5 { // warm-up
					lookup(small, q[0])
					lookup(big, q[1])
					naive(big, q[1])
				}
				var ts, tb, tn time.Duration
				for b.Loop() {
					ts += lookup(small, q[0])
					tb += lookup(big, q[1])
					tn += naive(big, q[1])
				}
				b.ReportMetric(float64(tb)/float64(ts), "100k/10")
				b.ReportMetric(float64(tb)/float64(tn), "dedup/naive@100k")
				b.ReportMetric(float64(tb.Nanoseconds())/float64(b.N*block), "ns/lookup@100k")
			})
		}
	}
}
