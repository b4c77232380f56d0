package shell

import (
	"regexp"
	"strings"
	"sync"
)

// dangerous are command shapes worth a warning before the user confirms
// a call. They are not a protection: a shell has countless ways to spell
// each of them (variables, eval, base64, a script written first). The
// sandbox and the confirmation are the protection.
// It is compiled on first use, not at every nb command's start.
var dangerous = sync.OnceValue(func() []denyRule {
	return []denyRule{
		{regexp.MustCompile(`\brm\s+(-[a-z]*[rf][a-z]*\s+)*-[a-z]*[rf]`), "recursive or forced delete (rm -r/-f)"},
		{regexp.MustCompile(`\b(mkfs(\.\w+)?|diskpart|wipefs)\b`), "formats a disk"},
		{regexp.MustCompile(`\bdd\s+[^|;&]*\bof=/dev/`), "writes a device (dd of=/dev/...)"},
		{regexp.MustCompile(`>\s*/dev/(sd|nvme|hd|vd|mmcblk)`), "writes a disk device"},
		{regexp.MustCompile(`\b(shutdown|reboot|poweroff|halt)\b`), "stops the machine"},
		{regexp.MustCompile(`:\(\)\s*\{.*\};\s*:`), "a fork bomb"},
		{regexp.MustCompile(`\b(curl|wget)\b[^|;&]*\|\s*(sudo\s+)?(ba|z|da)?sh\b`), "runs a script downloaded from the network"},
		{regexp.MustCompile(`\bchmod\s+(-[a-z]*\s+)*[0-7]*777\b`), "makes files writable by everyone"},
		{regexp.MustCompile(`\bgit\s+push\b[^|;&]*(--force|-f\b)`), "force-pushes"},
	}
})

type denyRule struct {
	re   *regexp.Regexp
	what string
}

// Warning returns why command looks dangerous, or "" when it does not
// look dangerous (which proves nothing).
func Warning(command string) string {
	lower := strings.ToLower(command)
	var found []string
	for _, d := range dangerous() {
		if d.re.MatchString(lower) {
			found = append(found, d.what)
		}
	}
	return strings.Join(found, "; ")
}
