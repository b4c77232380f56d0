package cartridge

import "strings"

// Allows reports whether a user's answer to a tool confirmation allows the
// call, by the cartridge's rules for mode: the answer, trimmed and in any
// case, must be one of the yes-words (Yeses); an empty answer is the
// confirming default (n unless the cartridge says otherwise).
func (c *Cartridge) Allows(mode Mode, answer string) bool {
	answer = strings.ToLower(strings.TrimSpace(answer))
	if answer == "" {
		answer = strings.ToLower(strings.TrimSpace(c.ToolSetting(mode, Confirming, "default")))
	}
	for _, y := range c.Yeses(mode) {
		if answer == y {
			return true
		}
	}
	return false
}
