package cluster

import (
	"fmt"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
)

// The two databases of a cluster, and the server module's embedded schema
// for each (go.temporal.io/server/schema: DIR/schema.sql and
// DIR/versioned/vX.Y).
const (
	storeDatabase      = "temporal"
	visibilityDatabase = "temporal_visibility"
	storeSchema        = "postgresql/v12/temporal"
	visibilitySchema   = "postgresql/v12/visibility"
)

// sqlConfig is how every process reaches database on the cluster's
// PostgreSQL (the postgres12 plugin, lib/pq underneath).
func sqlConfig(address, database string) *config.SQL {
	return &config.SQL{
		PluginName:      postgresql.PluginName,
		DatabaseName:    database,
		ConnectAddr:     address,
		ConnectProtocol: "tcp",
		User:            dbUser,
		ConnectAttributes: map[string]string{
			"sslmode": "disable",
		},
	}
}

// setupSchemas creates both databases and brings each to the latest
// versioned schema, as temporal-sql-tool does with create-database,
// setup-schema -v 0.0 and update-schema -d DIR/versioned: the same code,
// called directly.
func setupSchemas(address string) error {
	logger := log.NewNoopLogger()
	for _, db := range []struct{ name, schema string }{
		{storeDatabase, storeSchema},
		{visibilityDatabase, visibilitySchema},
	} {
		// DoCreateDatabase connects to the default database "postgres".
		if err := sqltool.DoCreateDatabase(sqlConfig(address, db.name), "postgres", logger); err != nil {
			return fmt.Errorf("cluster: create database %s: %w", db.name, err)
		}
		conn, err := sqltool.NewConnection(sqlConfig(address, db.name), logger)
		if err != nil {
			return fmt.Errorf("cluster: connect to database %s: %w", db.name, err)
		}
		err = schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run()
		if err == nil {
			err = schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: db.name, SchemaName: db.schema}, logger).Run()
		}
		conn.Close()
		if err != nil {
			return fmt.Errorf("cluster: schema of database %s: %w", db.name, err)
		}
	}
	return nil
}
