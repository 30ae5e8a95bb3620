package scenario

import (
	"testing"
)

// FuzzParse: a scenario file is parsed or refused with an error; never a
// panic, and a parsed one has runs whose calls all have ids and names.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"runs": [{"turns": [{"tool_calls": [{"id": "c1", "name": "mint_case_id", "arguments": "{}"}]}]}]}`,
		`{"name": "x", "rule": "r", "scenario": {"runs": [{"thread_id": "t", "hooks": ["h"], "turns": [{"text": "done"}], "resumes": [{"answer": "ok", "turns": []}]}]}, "expect": {}}`,
		`{"runs": []}`, `{"runs": [{"turns": [], "model": "x"}]}`, `[`, `null`, `{"scenario": null}`,
		`{"runs": [{"turns": [{"tool_calls": [{"id": "c1", "name": "t", "arguments": {}}]}]}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse(data, func(h string) bool { return h == "h" })
		if err != nil {
			return
		}
		if len(sc.Runs) == 0 {
			t.Fatal("parsed a scenario with no runs")
		}
		for _, r := range sc.Runs {
			for _, turn := range r.Turns {
				for _, c := range turn.ToolCalls {
					if c.ID == "" || c.Name == "" {
						t.Fatalf("call without id or name: %+v", c)
					}
				}
			}
		}
	})
}
