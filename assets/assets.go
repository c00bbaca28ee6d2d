// Package assets embeds flowd's stylesheets and scripts so the binary serves
// them itself; pages load nothing from a third party.
package assets

import "embed"

// FS holds css/ and js/.
//
//go:embed css js
var FS embed.FS
