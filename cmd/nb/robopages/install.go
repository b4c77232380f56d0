package robopages

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/robopage"
)

func (c *command) install(args []string) error {
	fs := c.flags("install", "Install pages from a local archive or folder.")
	var source, dest string
	fs.stringVar(&source, "S", "source", "", "ARCHIVE", "a local .zip, .tar.gz or .tgz archive, or a folder of pages (nb does not download)")
	fs.stringVar(&dest, "P", "path", "~/.robopages", "PATH", "where to install the pages")
	if err := fs.parse(args, c.stdout); err != nil {
		return err
	}
	if source == "" {
		return usageError{errors.New("--source is required: download https://github.com/dreadnode/robopages/archive/refs/heads/main.zip and pass the file")}
	}
	if _, err := os.Stat(source); err != nil {
		return fmt.Errorf("%s is not a local file or folder, and nb does not download: fetch the archive (for GitHub, https://github.com/<owner>/<repo>/archive/refs/heads/main.zip) and pass its path with --source", source)
	}
	dest = filepath.Clean(robopage.ExpandPath(dest, c.environ))
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("%s already exists: remove it or choose another --path", dest)
	}
	n, err := installFrom(source, dest)
	if err != nil {
		os.RemoveAll(dest)
		return err
	}
	fmt.Fprintf(c.stdout, "installed %d files from %s to %s\n", n, source, dest)
	return nil
}

// installFrom copies or extracts source into dest; a single top folder
// of an archive is removed, as GitHub archives have one.
func installFrom(source, dest string) (int, error) {
	st, err := os.Stat(source)
	if err != nil {
		return 0, err
	}
	var files []archiveFile
	switch {
	case st.IsDir():
		return copyTree(source, dest)
	case strings.HasSuffix(source, ".zip"):
		zr, err := zip.OpenReader(source)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", source, err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			f := f
			files = append(files, archiveFile{name: f.Name, dir: f.FileInfo().IsDir(), mode: f.Mode(), open: func() (io.ReadCloser, error) { return f.Open() }})
		}
		return extract(files, dest)
	case strings.HasSuffix(source, ".tar.gz") || strings.HasSuffix(source, ".tgz"):
		fh, err := os.Open(source)
		if err != nil {
			return 0, err
		}
		defer fh.Close()
		gz, err := gzip.NewReader(fh)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", source, err)
		}
		tr := tar.NewReader(gz)
		var tfiles []archiveFile
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, fmt.Errorf("read %s: %w", source, err)
			}
			if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
				continue // links and devices are not pages
			}
			data, err := io.ReadAll(io.LimitReader(tr, 64<<20))
			if err != nil {
				return 0, err
			}
			tfiles = append(tfiles, archiveFile{name: h.Name, dir: h.Typeflag == tar.TypeDir, mode: fs.FileMode(h.Mode) & 0o777, data: data})
		}
		return extract(tfiles, dest)
	}
	return 0, fmt.Errorf("%s: install takes a folder, a .zip, a .tar.gz or a .tgz", source)
}

type archiveFile struct {
	name string
	dir  bool
	mode fs.FileMode
	data []byte
	open func() (io.ReadCloser, error)
}

func extract(files []archiveFile, dest string) (int, error) {
	// Remove a single top folder common to every entry.
	top := ""
	for i, f := range files {
		first, _, _ := strings.Cut(strings.TrimPrefix(path.Clean("/"+f.name), "/"), "/")
		if i == 0 {
			top = first
		} else if first != top {
			top = ""
			break
		}
	}
	n := 0
	for _, f := range files {
		name := strings.TrimPrefix(path.Clean("/"+f.name), "/")
		if top != "" {
			if name == top {
				continue
			}
			name = strings.TrimPrefix(name, top+"/")
		}
		if name == "" || name == "." {
			continue
		}
		target := filepath.Join(dest, filepath.FromSlash(name))
		// path.Clean("/"+...) already removed "..": the target stays below dest.
		if f.dir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return n, err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return n, err
		}
		if err := writeEntry(f, target); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func copyTree(src, dest string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dest, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		return os.WriteFile(target, data, info.Mode().Perm()|0o600)
	})
	return n, err
}

// writeEntry writes one archive file, at most 64 MB of it.
func writeEntry(f archiveFile, target string) error {
	var r io.Reader = strings.NewReader(string(f.data))
	if f.open != nil {
		rc, err := f.open()
		if err != nil {
			return err
		}
		defer rc.Close()
		r = rc
	}
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode.Perm()|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(r, 64<<20)); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
