package state

import (
	"encoding/json"
	"os"
	"slices"
)

// CrashTurn does what a process killed in the middle of a turn's Append
// leaves: half of the new state in a temporary file, and the lock file
// closed by the kernel.
func CrashTurn(tu Turn, events []Event) error {
	t := tu.(*fileTurn)
	records := append(slices.Clone(t.records), JSON(events)...)
	data, err := json.Marshal(&Document{Key: t.s.key, History: records})
	if err != nil {
		return err
	}
	if t.s.cipher != nil {
		enc, err := t.s.cipher.Encrypt(data)
		if err != nil {
			return err
		}
		data = []byte(enc)
	}
	f, err := os.CreateTemp(t.s.dir, tempPrefix+"*"+tempSuffix)
	if err != nil {
		return err
	}
	if _, err := f.Write(data[:len(data)/2]); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	t.End()
	return nil
}
