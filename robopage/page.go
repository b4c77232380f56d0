// Package robopage loads robopages, YAML pages that describe command-line
// tools for language models, and runs their functions: interpolation of
// the arguments, the host or container command line, limits on time and
// output. It follows the robopages reference (dreadnode/robopages-cli)
// and reports broken pages instead of refusing the whole folder.
package robopage

import (
	"path/filepath"
	"strings"
)

// Page is one robopage file: a set of functions sharing a name and categories.
type Page struct {
	// Name is the page's `name`, or the file stem when it has none.
	Name string
	// Description is the page's `description`; empty when absent.
	Description string
	// Categories are the page's `categories`, or the folders between the
	// library root and the file when it has none.
	Categories []string
	// Functions are sorted by their name in the file.
	Functions []*Function
	// Path is the canonical absolute path of the file.
	Path string
	// Rel is the file relative to the library root, with slashes.
	Rel string
	// File is the file as found: the library path as given, joined with Rel.
	File string
}

// Function is one tool of a page.
type Function struct {
	// Name is the name the function is served and called by. It differs
	// from Key when another page already used that name (see Load).
	Name string
	// Key is the function's name as written in the page.
	Key string
	// Description tells the model what the function does.
	Description string
	// Parameters are sorted by name.
	Parameters []*Parameter
	// Container, when set, says how to run the function in a container.
	Container *Container
	// Cmdline is the command line, one argv element per item; nil when
	// the page gives Platforms instead.
	Cmdline []string
	// Platforms maps an operating system name (linux, macos, windows,
	// freebsd, ...) to its command line.
	Platforms map[string][]string
	// Page is the page the function belongs to.
	Page *Page
	// Line is the line of the function's key in the page file.
	Line int

	// lineOf finds the line of a key below the function (validation).
	lineOf func(path ...string) int
}

// line is the line of the key at path below the function, or Line.
func (f *Function) line(path ...string) int {
	if f.lineOf != nil {
		if l := f.lineOf(path...); l > 0 {
			return l
		}
	}
	return f.Line
}

// Parameter is one argument of a function.
type Parameter struct {
	// Name is the argument's name in calls and placeholders.
	Name string
	// Type is free text shown to the model ("string", "integer"); never checked.
	Type string
	// Description tells the model what to pass.
	Description string
	// Required is true unless the page says `required: false` or gives a
	// `default:`.
	Required bool
	// Examples are example values, shown by the rigging flavor.
	Examples []string
	// Default is the page's `default:` value (an extension: the reference
	// ignores the key); nil when absent.
	Default *string
	// AllowLeadingDash and AllowParentDir are the page's `allow:` list (an
	// extension): they let a value start an argument with "-", or hold a
	// ".." path segment, which calls are otherwise refused for.
	AllowLeadingDash, AllowParentDir bool
}

// Container says how to run a function in a container.
type Container struct {
	// Image is the image to pull when absent; empty when Build is set.
	Image string
	// Build builds a local image instead of pulling one.
	Build *Build
	// Args are extra `docker run` arguments, passed verbatim.
	Args []string
	// Volumes each become one `-v<volume>` argument.
	Volumes []string
	// Force runs the container even when the program is on the host.
	Force bool
	// PreserveApp keeps the program name after the image name; otherwise
	// the program is dropped and the arguments go to the image's entrypoint.
	PreserveApp bool
	// Platform is passed to `docker pull --platform` only.
	Platform string
}

// Build describes a locally built image.
type Build struct {
	// Name is the image tag.
	Name string
	// Path is the Dockerfile; its folder is the build context.
	Path string
}

// ImageName is the image the container runs: Image, or the Build tag.
func (c *Container) ImageName() string {
	if c.Build != nil {
		return c.Build.Name
	}
	return c.Image
}

// CommandLine is the function's command line for the operating system
// goos (Rust's names: linux, macos, windows, ...); false when none.
func (f *Function) CommandLine(goos string) ([]string, bool) {
	if f.Cmdline != nil {
		return f.Cmdline, true
	}
	c, ok := f.Platforms[goos]
	return c, ok
}

// Parameter returns the parameter called name, or nil.
func (f *Function) Parameter(name string) *Parameter {
	for _, p := range f.Parameters {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Schema is the JSON Schema of the function's arguments, as the openai
// flavor serves it: each property has only a type and a description and
// required lists the required parameters in name order.
func (f *Function) Schema() map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, p := range f.Parameters {
		props[p.Name] = map[string]any{"type": p.Type, "description": p.Description}
		if p.Required {
			required = append(required, p.Name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required}
}

// OS is the reference's name for a Go GOOS value: darwin is macos, the
// others keep their name.
func OS(goos string) string {
	if goos == "darwin" {
		return "macos"
	}
	return goos
}

// categoriesFromPath returns the folders between root and the file.
func categoriesFromPath(rel string) []string {
	dir := filepath.ToSlash(filepath.Dir(rel))
	if dir == "." || dir == "" {
		return nil
	}
	return strings.Split(dir, "/")
}
