// Package files is the files group of nb's built-in tools: read_file,
// write_file, edit_file, list_dir, glob and grep. Every tool works inside
// one workspace folder through an environment.Files: locally an os.Root,
// where "..", absolute paths and symbolic links that lead outside are
// refused by the kernel-backed, traversal-resistant lookups of os.Root,
// not by string checks; remotely SFTP (package remote), which resolves
// names on the remote side before it uses them.
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/builtin/environment"
	"github.com/nbots/nb/tool"
)

// Workspace is the folder the file tools work in.
type Workspace struct {
	root environment.Files
	dir  string
	// remote is set for a workspace on another machine (OpenOn): the
	// call's policy, about this machine's files, does not apply there.
	remote bool
	// hardLinks lets the tools read regular files with more than one
	// name (see AllowHardLinks).
	hardLinks bool
	// policy is the call's (see Policy and in); nil for none.
	policy *Policy
	// images lets read_file answer pictures as images (see AllowImages).
	images bool
	// work, when set, is the workspace of a Workspace opened with
	// OpenAnywhere: the root is then the file system's (dir is "/"), and
	// relative paths start at work. home expands ~ then.
	work, home string
}

// OpenAnywhere opens the file system's root for tools whose relative
// paths start in the workspace dir, as nanobot's do with
// restrictToWorkspace false: absolute paths, .. and ~ (home, when not
// "") reach every file this user can. The policy a call carries still
// applies.
func OpenAnywhere(dir, home string) (*Workspace, error) {
	w, err := Open(dir)
	if err != nil {
		return nil, err
	}
	w.Close()
	root, err := os.OpenRoot("/")
	if err != nil {
		return nil, fmt.Errorf("the file system's root cannot be opened: %v", unwrap(err))
	}
	return &Workspace{root: environment.Local(root), dir: "/", work: w.dir, home: home}, nil
}

// show is how a name (as rel returns it) is shown to the model: relative
// to the workspace inside it, else absolute (for a Workspace opened
// with OpenAnywhere); the name itself otherwise.
func (w *Workspace) show(name string) string {
	if w.work == "" {
		return display(name)
	}
	abs := filepath.Join("/", name)
	if r, err := filepath.Rel(w.work, abs); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
		return display(r)
	}
	return filepath.ToSlash(abs)
}

// AllowImages lets read_file answer a PNG, JPEG, GIF or WebP file (up to
// media.MaxImageBytes) as an image for the model, instead of refusing it
// as binary: for models that take images (builtins.files.images).
func (w *Workspace) AllowImages(allow bool) { w.images = allow }

// AllowHardLinks lets the tools read regular files that have more than
// one link (builtins.files.hard-links). By default they are refused: a
// hard link made inside the workspace to a file outside it is the file
// itself, which os.Root cannot tell from a file of the workspace.
func (w *Workspace) AllowHardLinks(allow bool) { w.hardLinks = allow }

// Open opens the workspace at dir (an absolute path, or relative to the
// process's working directory).
func Open(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("the workspace %s does not exist: create it or name another folder", abs)
		}
		return nil, fmt.Errorf("the workspace %s cannot be used: %v", abs, unwrap(err))
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("the workspace %s is not a folder", abs)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("the workspace %s cannot be opened: %v", abs, unwrap(err))
	}
	return &Workspace{root: environment.Local(root), dir: abs}, nil
}

// OpenOn makes a workspace of files on another machine, whose workspace
// folder there is dir (an absolute path on that machine).
func OpenOn(root environment.Files, dir string) *Workspace {
	return &Workspace{root: root, dir: dir, remote: true}
}

// Dir is the workspace's absolute path.
func (w *Workspace) Dir() string {
	if w.work != "" {
		return w.work
	}
	return w.dir
}

// Close releases the workspace.
func (w *Workspace) Close() error { return w.root.Close() }

// rel turns a path the model gave into a name for the os.Root: relative
// paths as they are; an absolute path that names something inside the
// workspace becomes relative (models often repeat the absolute paths a
// command printed). Anything else is passed on unchanged for os.Root to
// refuse: the check is the Root's, never this function's. A path that
// starts with ~ is refused with a word on why: the model means a home
// folder, which the tools never reach, not a folder named "~".
func (w *Workspace) rel(p string) (string, error) {
	if w.work != "" {
		if p == "" {
			p = "."
		}
		if p == "~" || strings.HasPrefix(p, "~/") {
			if w.home == "" {
				return "", fmt.Errorf("%s: no home folder is known to expand ~ in: give the absolute path", p)
			}
			p = filepath.Join(w.home, p[1:])
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(w.work, p)
		}
		r, err := filepath.Rel("/", filepath.Clean(p))
		if err != nil {
			return "", fmt.Errorf("%s: %v", p, err)
		}
		return r, nil
	}
	if p == "" {
		return ".", nil
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		return "", fmt.Errorf("%s: the file tools do not expand ~ (a home folder is outside the workspace, %s): give a path relative to the workspace", p, w.dir)
	}
	if filepath.IsAbs(p) {
		if r, err := filepath.Rel(w.dir, filepath.Clean(p)); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			return r, nil
		}
	}
	return p, nil
}

// display is how a path is named in messages: relative to the workspace.
func display(name string) string {
	return filepath.ToSlash(filepath.Clean(name))
}

// pathError turns an error of an os.Root operation on the path the model
// gave into a message that says what to do.
func (w *Workspace) pathError(p string, err error) error {
	switch {
	case err == nil:
		return nil
	case isEscape(err):
		return fmt.Errorf("%s is outside the workspace (%s): the file tools only reach files inside it; give a path relative to the workspace, without .. or links that lead out", p, w.dir)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file or folder in the workspace (list_dir or glob show what exists)", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", p)
	}
	return fmt.Errorf("%s: %v", p, unwrap(err))
}

// isEscape reports whether err refuses a path that leaves the root (see
// environment.IsEscape); an absolute link target is refused the same way.
func isEscape(err error) bool { return environment.IsEscape(err) }

// unwrap drops the operation and path of an *fs.PathError, which the
// caller names itself.
func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Tools returns the group's tools on w: read_file, list_dir, glob and
// grep, and when write is true write_file and edit_file.
func Tools(w *Workspace, write bool, profile Profile) []tool.Tool {
	tools := []tool.Tool{ReadFile(w), ListDir(w), Glob(w), Grep(w)}
	if write {
		tools = append(tools, WriteFile(w), profile.EditTool(w))
	}
	return tools
}
