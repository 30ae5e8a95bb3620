// Command installweed builds SeaweedFS's weed, the S3 server package
// s3test runs in tests, once, into ~/.cache/tulip-test-deps (s3test.Install):
//
//	go run github.com/tulip-temporal/tulip/s3store/s3test/installweed
//
// It prints the binary's path. The first build takes minutes.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tulip-temporal/tulip/s3store/s3test"
)

func main() {
	p, err := s3test.Install(context.Background(), func(s string) { fmt.Fprintln(os.Stderr, "installweed:", s) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(p)
}
