// Package static embeds the dashboard's stylesheet and scripts. Each file is
// served under a URL carrying a hash of its content, so browsers may cache
// it for a year and still pick up a new version at once.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
)

// htmx.min.js is the htmx.org 2.0.11 release from npm, vendored.
//
//go:embed app.css app.js htmx.min.js
var files embed.FS

// File is one embedded asset.
type File struct {
	Name    string
	Content []byte
	// Version is a short hash of Content, used as ?v= in URLs.
	Version string
}

var byName = func() map[string]File {
	m := map[string]File{}
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		b, _ := files.ReadFile(e.Name())
		sum := sha256.Sum256(b)
		m[e.Name()] = File{Name: e.Name(), Content: b, Version: hex.EncodeToString(sum[:6])}
	}
	return m
}()

// Lookup returns the named asset.
func Lookup(name string) (File, bool) {
	f, ok := byName[name]
	return f, ok
}

// Names lists every asset.
func Names() []string {
	out := make([]string, 0, len(byName))
	for n := range byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// URL returns the versioned URL of the named asset.
func URL(name string) string {
	f, ok := byName[name]
	if !ok {
		return "/static/" + name
	}
	return "/static/" + name + "?v=" + f.Version
}
