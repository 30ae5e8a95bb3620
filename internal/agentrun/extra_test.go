package agentrun_test

import (
	"context"

	"github.com/tulip-temporal/tulip/internal/dedup"
)

type contextT = context.Context

func limits(depth int) dedup.Limits { return dedup.Limits{MaxDepth: depth} }
