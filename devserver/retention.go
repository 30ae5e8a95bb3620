package devserver

import (
	"context"
	"fmt"
	"time"

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// keepRetention brings the namespace's retention to the configured one. A
// new database has it from its creation; a database file created before
// (by an older tulip, with the server's default of a day, or with another
// --retention) is updated through the frontend, as the Temporal CLI's
// 'operator namespace update --retention' would.
func (s *Server) keepRetention(limit time.Duration) error {
	conn, err := grpc.NewClient(s.address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("devserver: retention: %w", err)
	}
	defer conn.Close()
	ws := workflowservice.NewWorkflowServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		last = s.setRetention(ctx, ws)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("devserver: setting namespace %s's retention to %s: %w", s.namespace, s.retention, last)
}

func (s *Server) setRetention(ctx context.Context, ws workflowservice.WorkflowServiceClient) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	desc, err := ws.DescribeNamespace(rctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.namespace})
	if err != nil {
		return err
	}
	if desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() == s.retention {
		return nil
	}
	_, err = ws.UpdateNamespace(rctx, &workflowservice.UpdateNamespaceRequest{
		Namespace: s.namespace,
		Config:    &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(s.retention)},
	})
	return err
}
