package whatsapp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// LIDs remembers which phone number a WhatsApp LID (the anonymous
// address groups use) stands for: from the configuration's lidMappings,
// then from each message that carries both. It is shared by the bridge
// and the native mode, which pick a sender's id the same way.
type LIDs struct {
	mu    sync.Mutex
	phone map[string]string // LID → phone
}

// maxLIDs bounds what messages teach: past it the map starts over.
const maxLIDs = 10_000

// NewLIDs starts from the configuration's lidMappings (LID → phone,
// either side a bare number or a JID).
func NewLIDs(known map[string]string) *LIDs {
	l := &LIDs{phone: make(map[string]string, len(known))}
	for k, v := range known {
		l.phone[bare(k)] = bare(v)
	}
	return l
}

// Sender is the id of a message's sender, as nanobot picks it: the phone
// number when the message carries one (remembered for lid), else the
// phone remembered for lid, else lid; "" when neither is known.
func (l *LIDs) Sender(phone, lid string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if phone != "" && lid != "" {
		if len(l.phone) > maxLIDs {
			l.phone = map[string]string{}
		}
		l.phone[lid] = phone
	}
	switch {
	case phone != "":
		return phone
	case l.phone[lid] != "":
		return l.phone[lid]
	}
	return lid
}

// OutgoingFile resolves a file the assistant sends: a regular file
// inside workspace of at most MaxFileBytes, links resolved, so that
// nothing else is read. p is relative to workspace or absolute.
func OutgoingFile(workspace, p string) (string, error) {
	if workspace == "" {
		return "", errors.New("no workspace to send files from")
	}
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(workspace, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", errors.New("no such file")
	}
	if rel, err := filepath.Rel(ws, real); err != nil || !filepath.IsLocal(rel) {
		return "", errors.New("outside the workspace")
	}
	info, err := os.Stat(real)
	switch {
	case err != nil || !info.Mode().IsRegular():
		return "", errors.New("not a regular file")
	case info.Size() > MaxFileBytes:
		return "", fmt.Errorf("%d bytes, over WhatsApp's %d", info.Size(), int64(MaxFileBytes))
	}
	return real, nil
}
