package main

import (
	"os"
	"path/filepath"
	"testing"
)

// crash must return (not kill) anywhere but its point, and at its point once
// the marker exists: the replacement worker runs the same code.
func TestCrashOnlyAtItsPointAndOnce(t *testing.T) {
	m := filepath.Join(t.TempDir(), "marker")
	*crashAt, *marker = AfterBilling, m
	crash(BeforeBilling)
	crash(AfterCompletion)
	if _, err := os.Stat(m); !os.IsNotExist(err) {
		t.Fatalf("marker written at the wrong point: %v", err)
	}
	if err := os.WriteFile(m, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	crash(AfterBilling) // crashed before: returns
	*crashAt = ""
	crash(AfterBilling)
}
