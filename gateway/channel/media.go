package channel

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
)

// TooLarge is an inbound file over the channel's size limit; Size is 0
// when the download was cut off before its size was known.
type TooLarge struct {
	Size, Limit int64
}

func (e *TooLarge) Error() string {
	if e.Size > 0 {
		return fmt.Sprintf("%d bytes, over the limit of %d", e.Size, e.Limit)
	}
	return fmt.Sprintf("over the limit of %d bytes", e.Limit)
}

var unsafeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]`) })

// SafeName replaces what may not appear in a stored file's name (path
// separators, spaces, anything outside [A-Za-z0-9._-]) with "_".
func SafeName(name string) string { return unsafeName().ReplaceAllString(name, "_") }

// SaveMedia downloads req through hc (a client dialling through the
// egress guard) into dir/name, refusing more than limit bytes by the
// announced length and while it reads; the file appears whole or not at
// all. It returns the stored path. Errors may quote req's URL: a caller
// whose URLs hold secrets redacts them.
func SaveMedia(hc *http.Client, req *http.Request, dir, name string, limit int64) (string, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download: %s", resp.Status)
	}
	if resp.ContentLength > limit {
		return "", &TooLarge{Size: resp.ContentLength, Limit: limit}
	}
	path, err := StoreMedia(resp.Body, dir, name, limit)
	if err != nil && !IsTooLarge(err) {
		return "", fmt.Errorf("download: %w", err)
	}
	return path, err
}

// StoreMedia writes what r holds into dir/name (made safe), refusing more
// than limit bytes; the file appears whole or not at all. It returns the
// stored path. When dir is a folder of Env.MediaDir, the oldest files of
// the media folder are then removed until it is within Env.MediaQuota.
func StoreMedia(r io.Reader, dir, name string, limit int64) (string, error) {
	tmp, err := os.CreateTemp(dir, ".download-*")
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	n, err := io.Copy(tmp, io.LimitReader(r, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", &TooLarge{Limit: limit}
	}
	path := filepath.Join(dir, SafeName(name))
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	enforceQuota(dir, path)
	return path, nil
}

// IsTooLarge reports whether err is, or wraps, a *TooLarge.
func IsTooLarge(err error) bool {
	var t *TooLarge
	return errors.As(err, &t)
}
