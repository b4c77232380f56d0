package remote

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/pkg/sftp"

	"github.com/nbots/nb/builtin/environment"
)

// The file operations. A name is resolved on the remote side before it is
// used: joined to the workspace, refused when it leaves it lexically (..,
// an absolute path), then its symbolic links resolved by the server
// (SFTP realpath) and refused when the result is not inside the
// workspace's real path. Between that check and the use, a process on the
// remote machine could swap a folder for a link: SFTP has no equivalent
// of os.Root's descriptor-relative lookups; the remote user's own rights
// bound what such a race can reach.

// resolve is the remote path of name, inside the workspace; followLast
// also resolves a link that name itself is (otherwise only its folder's).
func (e *Env) resolve(sc *sftp.Client, name string, followLast bool) (string, error) {
	if path.IsAbs(name) || strings.HasPrefix(name, `\`) {
		return "", escape(name)
	}
	full := path.Join(e.dir, name)
	if !e.inside(full) {
		return "", escape(name)
	}
	if full == e.dir {
		return full, nil
	}
	if !followLast {
		dir, err := e.resolve(sc, path.Dir(name), true)
		if err != nil {
			return "", err
		}
		return path.Join(dir, path.Base(full)), nil
	}
	real, err := e.realPath(sc, full)
	if err != nil {
		return "", err
	}
	if !e.inside(real) {
		return "", escape(name)
	}
	return real, nil
}

// realPath resolves p's links on the server; the part of p that does not
// exist yet (a file about to be written) is kept as it is.
func (e *Env) realPath(sc *sftp.Client, p string) (string, error) {
	rest := ""
	for cur := p; ; {
		if _, err := sc.Lstat(cur); err == nil {
			real, err := sc.RealPath(cur)
			if err != nil {
				return "", err
			}
			return path.Join(real, rest), nil
		} else if !isNotExist(err) {
			return "", err
		}
		parent := path.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = path.Join(path.Base(cur), rest)
		cur = parent
	}
}

// locate is the SFTP client and name's resolved remote path (see resolve).
func (e *Env) locate(name string, followLast bool) (*sftp.Client, string, error) {
	sc, err := e.files()
	if err != nil {
		return nil, "", err
	}
	p, err := e.resolve(sc, name, followLast)
	if err != nil {
		return nil, "", err
	}
	return sc, p, nil
}

// inside reports whether p is the workspace or below it.
func (e *Env) inside(p string) bool {
	return p == e.dir || strings.HasPrefix(p, strings.TrimSuffix(e.dir, "/")+"/")
}

func escape(name string) error {
	return &fs.PathError{Op: "open", Path: name, Err: environment.ErrEscape}
}

func isNotExist(err error) bool {
	var se *sftp.StatusError
	return errors.Is(err, fs.ErrNotExist) || (errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxNoSuchFile)
}

// pathErr is err as an *fs.PathError whose cause errors.Is recognizes.
func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.Is(pe.Err, environment.ErrEscape) {
		return err
	}
	var se *sftp.StatusError
	switch {
	case isNotExist(err):
		err = fs.ErrNotExist
	case errors.Is(err, fs.ErrPermission), errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxPermissionDenied:
		err = fs.ErrPermission
	case errors.As(err, &se):
		err = errors.New(strings.TrimSuffix(se.Error(), "."))
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// OpenFile opens name. A name that is not a regular file is only looked
// at (Stat), never opened: opening a FIFO would hang the server's SFTP
// process, as O_NONBLOCK keeps it from doing locally.
func (e *Env) OpenFile(name string, flag int, perm fs.FileMode) (environment.File, error) {
	sc, p, err := e.locate(name, true)
	if err != nil {
		return nil, err
	}
	flag &^= syscall.O_NONBLOCK
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE) == 0 {
		info, err := sc.Stat(p)
		if err != nil {
			return nil, pathErr("open", name, err)
		}
		if !info.Mode().IsRegular() {
			return statOnly{info}, nil
		}
	}
	f, err := sc.OpenFile(p, flag)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return file{f}, nil
}

// Open opens name for reading.
func (e *Env) Open(name string) (environment.File, error) { return e.OpenFile(name, os.O_RDONLY, 0) }

// Stat describes name, its links followed.
func (e *Env) Stat(name string) (fs.FileInfo, error) {
	sc, p, err := e.locate(name, true)
	if err != nil {
		return nil, err
	}
	info, err := sc.Stat(p)
	return info, pathErr("stat", name, err)
}

// Lstat describes name itself.
func (e *Env) Lstat(name string) (fs.FileInfo, error) {
	sc, p, err := e.locate(name, false)
	if err != nil {
		return nil, err
	}
	info, err := sc.Lstat(p)
	return info, pathErr("lstat", name, err)
}

// Readlink is the target of the link name.
func (e *Env) Readlink(name string) (string, error) {
	sc, p, err := e.locate(name, false)
	if err != nil {
		return "", err
	}
	to, err := sc.ReadLink(p)
	return to, pathErr("readlink", name, err)
}

// MkdirAll makes the folder name and its parents.
func (e *Env) MkdirAll(name string, perm fs.FileMode) error {
	sc, p, err := e.locate(name, true)
	if err != nil {
		return err
	}
	return pathErr("mkdir", name, sc.MkdirAll(p))
}

// Remove removes the file (or empty folder) name.
func (e *Env) Remove(name string) error {
	sc, p, err := e.locate(name, false)
	if err != nil {
		return err
	}
	return pathErr("remove", name, sc.Remove(p))
}

// Rename renames oldname to newname, replacing it (POSIX rename, an
// OpenSSH extension, so the replacement is atomic).
func (e *Env) Rename(oldname, newname string) error {
	sc, from, err := e.locate(oldname, false)
	if err != nil {
		return err
	}
	to, err := e.resolve(sc, newname, false)
	if err != nil {
		return err
	}
	return pathErr("rename", oldname, sc.PosixRename(from, to))
}

// FS is the workspace as an fs.FS.
func (e *Env) FS() fs.FS { return remoteFS{e} }

type remoteFS struct{ e *Env }

func (r remoteFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := r.e.Open(name)
	if err != nil {
		return nil, err
	}
	return f.(fs.File), nil
}

func (r remoteFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return r.e.Stat(name)
}

// ReadDir lists a folder, sorted by name; the entries are what the
// server's readdir says (links not followed).
func (r remoteFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	sc, p, err := r.e.locate(name, true)
	if err != nil {
		return nil, err
	}
	infos, err := sc.ReadDir(p)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	out := make([]fs.DirEntry, 0, len(infos))
	for _, fi := range infos {
		out = append(out, fs.FileInfoToDirEntry(fi))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// file is an open remote file.
type file struct{ *sftp.File }

func (f file) Stat() (fs.FileInfo, error) { return f.File.Stat() }

// statOnly stands for a folder, device or FIFO: it can be described, not
// read.
type statOnly struct{ info fs.FileInfo }

func (s statOnly) Stat() (fs.FileInfo, error) { return s.info, nil }
func (s statOnly) Read([]byte) (int, error) {
	return 0, fmt.Errorf("%s is not a regular file", s.info.Name())
}
func (s statOnly) Write([]byte) (int, error)          { return 0, errors.ErrUnsupported }
func (s statOnly) Seek(int64, int) (int64, error)     { return 0, errors.ErrUnsupported }
func (s statOnly) Close() error                       { return nil }
func (s statOnly) Chmod(fs.FileMode) error            { return errors.ErrUnsupported }
func (s statOnly) Sync() error                        { return nil }
func (s statOnly) ReadDir(int) ([]fs.DirEntry, error) { return nil, errors.ErrUnsupported }

var _ environment.File = file{}
