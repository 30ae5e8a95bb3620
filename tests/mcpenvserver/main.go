// Command mcpenvserver is an MCP server on stdio for the tests: its tool
// env_digest tells whether a variable of its environment is set, and its
// length and SHA-256, never its value; given a file, it writes the value
// there (the effect a test checks outside the run's history).
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type digestArgs struct {
	Name string `json:"name"`
	File string `json:"file,omitempty"`
}

type digest struct {
	Name   string `json:"name"`
	Set    bool   `json:"set"`
	Len    int    `json:"len"`
	SHA256 string `json:"sha256"`
}

func main() {
	srv := sdk.NewServer(&sdk.Implementation{Name: "mcpenvserver", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "env_digest",
		Description: "Tells whether a variable of the server's environment is set, its length and SHA-256; writes its value to file when given."},
		func(_ context.Context, _ *sdk.CallToolRequest, a digestArgs) (*sdk.CallToolResult, digest, error) {
			v, ok := os.LookupEnv(a.Name)
			if a.File != "" {
				if err := os.WriteFile(a.File, []byte(v), 0o600); err != nil {
					return nil, digest{}, err
				}
			}
			sum := sha256.Sum256([]byte(v))
			return nil, digest{Name: a.Name, Set: ok, Len: len(v), SHA256: hex.EncodeToString(sum[:])}, nil
		})
	if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
