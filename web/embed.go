// Package web holds the admin panel's templates and static assets, embedded
// in the binary (a director is often offline: no CDN, no build step).
// server/panel parses the templates once at start and serves the assets
// under a content hash.
package web

import "embed"

// Templates are the html/template files: layout.html, one file per view
// in views/, and partials in partials/.
//
//go:embed templates
var Templates embed.FS

// Static are the assets: CSS, the small script and the icon.
//
//go:embed static
var Static embed.FS
