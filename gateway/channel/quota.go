package channel

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultMediaQuota is the media folder's quota when Env.MediaQuota is
// 0: 1 GiB (gateway.limits.mediaBytes).
const DefaultMediaQuota = 1 << 30

// quota is the bound of one workspace's media folder, shared by every
// channel that stores there.
type quota struct {
	mu  sync.Mutex
	max int64
	log *slog.Logger
}

// quotas are the media folders' quotas by folder (Workspace/media), set
// by Env.MediaDir: StoreMedia, which every channel calls with the folder
// MediaDir gave it, finds its quota there, so no channel can store
// around it.
var quotas sync.Map // string -> *quota

// setQuota records the quota of the media folder root.
func setQuota(root string, max int64, log *slog.Logger) {
	if max <= 0 {
		max = DefaultMediaQuota
	}
	v, _ := quotas.LoadOrStore(root, &quota{max: max, log: log})
	q := v.(*quota)
	q.mu.Lock()
	q.max, q.log = max, log
	q.mu.Unlock()
}

// enforceQuota removes the oldest files of the media folder that holds
// dir until it holds no more than its quota, keep excepted (the file
// just stored).
func enforceQuota(dir, keep string) {
	root := filepath.Dir(dir)
	v, ok := quotas.Load(root)
	if !ok {
		return
	}
	q := v.(*quota)
	q.mu.Lock()
	defer q.mu.Unlock()
	type file struct {
		path string
		size int64
		mod  time.Time
	}
	var files []file
	var total int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error { //nolint:errcheck // what cannot be read is not counted
		if err != nil || d.IsDir() || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".download-") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		files = append(files, file{p, info.Size(), info.ModTime()})
		total += info.Size()
		return nil
	})
	if total <= q.max {
		return
	}
	// sort.Slice, not slices.SortFunc: each struct type slices sorts links
	// its own pdqsort (bench/README.md, "Binary: sorts, metrics and the rest").
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	removed, freed := 0, int64(0)
	for _, f := range files {
		if total <= q.max {
			break
		}
		if f.path == keep {
			continue
		}
		if err := os.Remove(f.path); err != nil {
			continue
		}
		total -= f.size
		removed++
		freed += f.size
	}
	if q.log != nil && removed > 0 {
		q.log.Info("media folder over its quota: the oldest files removed (gateway.limits.mediaBytes)", "folder", root, "removed", removed, "bytes", freed, "quota", q.max)
	}
}
