// Package migrations embeds flowd's SQL migrations. Files are applied in the
// order of their number by internal/database.Migrate; an applied file is never
// edited, a change is a new file.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
